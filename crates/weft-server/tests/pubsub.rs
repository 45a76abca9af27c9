//! Pub/sub across clients on several event loops: channels and patterns,
//! RESP2 subscribe mode and RESP3 pushes, killing a subscriber, the
//! output-buffer limit of a subscriber that does not read, MONITOR.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Raw, TestServer, V};

/// Three loops: consecutive connections land on different loops, so
/// deliveries cross threads.
fn server() -> TestServer {
    TestServer::with(|c| c.threads = 3)
}

fn b(s: &str) -> V {
    V::bulk(s)
}

fn int(v: V) -> i64 {
    match v {
        V::Int(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// Polls `f` until it is true or 10 s pass.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn channels_and_patterns_reach_subscribers_on_other_loops_resp2() {
    let s = server();
    // The redis crate's pub/sub over RESP2.
    let mut c1 = s.conn();
    let mut c2 = s.conn();
    let mut p1 = c1.as_pubsub();
    p1.subscribe("news").unwrap();
    p1.subscribe("sport").unwrap();
    let mut p2 = c2.as_pubsub();
    p2.psubscribe("new?").unwrap();
    p2.psubscribe("n*").unwrap();
    p1.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    p2.set_read_timeout(Some(Duration::from_secs(10))).unwrap();

    let mut publisher = s.raw();
    // One channel subscriber and two matching patterns.
    assert_eq!(int(publisher.cmd(&["PUBLISH", "news", "hello"])), 3);
    assert_eq!(int(publisher.cmd(&["PUBLISH", "sport", "goal"])), 1);
    assert_eq!(int(publisher.cmd(&["PUBLISH", "nobody", "x"])), 1); // n*
    assert_eq!(int(publisher.cmd(&["PUBLISH", "zzz", "x"])), 0);

    let m = p1.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "news");
    assert_eq!(m.get_payload::<String>().unwrap(), "hello");
    assert!(!m.from_pattern());
    let m = p1.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "sport");
    assert_eq!(m.get_payload::<String>().unwrap(), "goal");

    let mut got = Vec::new();
    for _ in 0..3 {
        let m = p2.get_message().unwrap();
        assert!(m.from_pattern());
        got.push((
            m.get_pattern::<String>().unwrap(),
            m.get_channel_name().to_string(),
            m.get_payload::<String>().unwrap(),
        ));
    }
    let want = |p: &str, c: &str, m: &str| (p.to_string(), c.to_string(), m.to_string());
    assert!(got.contains(&want("new?", "news", "hello")), "{got:?}");
    assert!(got.contains(&want("n*", "news", "hello")), "{got:?}");
    assert_eq!(got[2], want("n*", "nobody", "x"));

    // The registry as PUBSUB reports it.
    assert_eq!(
        publisher.cmd(&["PUBSUB", "CHANNELS"]),
        V::Array(vec![b("news"), b("sport")])
    );
    assert_eq!(
        publisher.cmd(&["PUBSUB", "CHANNELS", "s*"]),
        V::Array(vec![b("sport")])
    );
    assert_eq!(
        publisher.cmd(&["PUBSUB", "NUMSUB", "news", "zzz"]),
        V::Array(vec![b("news"), V::Int(1), b("zzz"), V::Int(0)])
    );
    assert_eq!(int(publisher.cmd(&["PUBSUB", "NUMPAT"])), 2);

    // Unsubscribing ends delivery.
    p1.unsubscribe("news").unwrap();
    p2.punsubscribe("new?").unwrap();
    assert_eq!(int(publisher.cmd(&["PUBLISH", "news", "again"])), 1);
    drop(p1);
    drop(p2);
    drop(c1);
    drop(c2);
    // Closed connections leave the registry.
    eventually("subscribers gone", || {
        publisher.cmd(&["PUBSUB", "NUMPAT"]) == V::Int(0)
            && publisher.cmd(&["PUBSUB", "NUMSUB", "sport"])
                == V::Array(vec![b("sport"), V::Int(0)])
    });
}

#[test]
fn resp3_subscribers_get_push_messages_and_may_run_commands() {
    let s = server();
    let mut sub = s.raw();
    assert!(matches!(sub.cmd(&["HELLO", "3"]), V::Map(_)));
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "a", "b"]),
        V::Push(vec![b("subscribe"), b("a"), V::Int(1)])
    );
    assert_eq!(sub.read(), V::Push(vec![b("subscribe"), b("b"), V::Int(2)]));
    assert_eq!(
        sub.cmd(&["PSUBSCRIBE", "a*"]),
        V::Push(vec![b("psubscribe"), b("a*"), V::Int(3)])
    );
    // Under RESP3 any command runs while subscribed.
    assert_eq!(sub.cmd(&["SET", "k", "v"]), V::Simple("OK".into()));
    assert_eq!(sub.cmd(&["GET", "k"]), b("v"));

    let mut publisher = s.raw();
    assert_eq!(int(publisher.cmd(&["PUBLISH", "a", "m1"])), 2);
    assert_eq!(sub.read(), V::Push(vec![b("message"), b("a"), b("m1")]));
    assert_eq!(
        sub.read(),
        V::Push(vec![b("pmessage"), b("a*"), b("a"), b("m1")])
    );
    // The redis crate's pub/sub over RESP3 reads them as pushes.
    let mut c = s.conn_proto(true);
    let mut ps = c.as_pubsub();
    ps.subscribe("c").unwrap();
    ps.psubscribe("c*").unwrap();
    // Under RESP3 the crate does not wait for the subscription's push.
    eventually("the crate's subscriptions registered", || {
        publisher.cmd(&["PUBSUB", "NUMSUB", "c"]) == V::Array(vec![b("c"), V::Int(1)])
            && publisher.cmd(&["PUBSUB", "NUMPAT"]) == V::Int(2)
    });
    assert_eq!(int(publisher.cmd(&["PUBLISH", "c", "m2"])), 2);
    let m = ps.get_message().unwrap();
    assert_eq!((m.get_channel_name(), m.from_pattern()), ("c", false));
    assert_eq!(m.get_payload::<String>().unwrap(), "m2");
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_pattern::<String>().unwrap(), "c*");
    assert_eq!(m.get_payload::<String>().unwrap(), "m2");
    drop(ps);
    // UNSUBSCRIBE without channels: one push per channel, the count
    // going down (the pattern stays).
    sub.send(&["UNSUBSCRIBE"]);
    let mut seen = Vec::new();
    for count in [2, 1] {
        match sub.read() {
            V::Push(v) if v.len() == 3 && v[0] == b("unsubscribe") && v[2] == V::Int(count) => {
                seen.push(v[1].clone())
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    seen.sort_by_key(|v| format!("{v:?}"));
    assert_eq!(seen, vec![b("a"), b("b")]);
}

#[test]
fn resp2_subscribe_mode_allows_only_pubsub_commands() {
    let s = server();
    let mut sub = s.raw();
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "x"]),
        V::Array(vec![b("subscribe"), b("x"), V::Int(1)])
    );
    assert_eq!(
        sub.cmd(&["GET", "k"]),
        V::Err(
            "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
             RESET are allowed in this context"
                .into()
        )
    );
    assert!(matches!(sub.cmd(&["SET", "k", "v"]), V::Err(_)));
    assert_eq!(sub.cmd(&["PING"]), V::Array(vec![b("pong"), b("")]));
    assert_eq!(sub.cmd(&["PING", "hi"]), V::Array(vec![b("pong"), b("hi")]));
    // The SET above was refused, not written.
    assert_eq!(s.raw().cmd(&["GET", "k"]), V::Nil);
    assert_eq!(
        sub.cmd(&["UNSUBSCRIBE"]),
        V::Array(vec![b("unsubscribe"), b("x"), V::Int(0)])
    );
    // Out of subscribe mode.
    assert_eq!(sub.cmd(&["GET", "k"]), V::Nil);
    assert_eq!(sub.cmd(&["PING"]), V::Simple("PONG".into()));
    assert_eq!(
        sub.cmd(&["UNSUBSCRIBE"]),
        V::Array(vec![b("unsubscribe"), V::Nil, V::Int(0)])
    );
}

/// Many messages from one publisher reach a subscriber on another loop
/// whole and in order.
#[test]
fn messages_keep_their_order_across_loops() {
    let s = server();
    let mut sub = s.raw();
    sub.cmd(&["SUBSCRIBE", "seq"]);
    let mut publisher = s.raw();
    const N: usize = 2000;
    let mut batch = Vec::new();
    for i in 0..N {
        batch.extend_from_slice(&Raw::encode(&[
            b"PUBLISH",
            b"seq",
            i.to_string().as_bytes(),
        ]));
    }
    publisher.send_bytes(&batch);
    for _ in 0..N {
        assert_eq!(publisher.read(), V::Int(1));
    }
    for i in 0..N {
        assert_eq!(
            sub.read(),
            V::Array(vec![b("message"), b("seq"), b(&i.to_string())])
        );
    }
}

#[test]
fn client_kill_closes_a_subscribed_client() {
    let s = server();
    let mut sub = s.raw();
    let V::Int(id) = sub.cmd(&["CLIENT", "ID"]) else {
        panic!("no id")
    };
    sub.cmd(&["SUBSCRIBE", "ch"]);
    let mut admin = s.raw();
    assert!(matches!(admin.cmd(&["HELLO", "3"]), V::Map(_)));
    let V::Verbatim(list) = admin.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]) else {
        panic!("CLIENT LIST is not verbatim text under RESP3")
    };
    assert!(list.contains(&format!("id={id} ")), "{list}");
    assert!(list.contains("flags=P"), "{list}");
    assert!(list.contains("sub=1"), "{list}");
    assert_eq!(list.lines().count(), 1, "{list}");
    assert_eq!(
        int(admin.cmd(&["CLIENT", "KILL", "ID", &id.to_string()])),
        1
    );
    assert!(
        closed_by_server(&mut sub),
        "the killed subscriber's connection is open"
    );
    eventually("the killed subscriber left its channel", || {
        admin.cmd(&["PUBSUB", "NUMSUB", "ch"]) == V::Array(vec![b("ch"), V::Int(0)])
    });
    let V::Verbatim(list) = admin.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST is not verbatim text under RESP3")
    };
    assert!(!list.contains(&format!("id={id} ")), "{list}");
    assert_eq!(
        int(admin.cmd(&["CLIENT", "KILL", "ID", &id.to_string()])),
        0
    );
}

/// A subscriber that never reads is disconnected once its queued output
/// passes the hard pub/sub limit; the publisher goes on unhurt.
#[test]
fn a_subscriber_that_never_reads_is_dropped_past_the_hard_limit() {
    let s = TestServer::with(|c| {
        c.threads = 2;
        c.pubsub_output_limit = weft_server::OutputLimit {
            hard: 1 << 20,
            soft: 0,
            soft_seconds: 0,
        };
    });
    let mut sub = s.raw();
    sub.cmd(&["SUBSCRIBE", "firehose"]);
    let mut publisher = s.raw();
    let payload = "x".repeat(64 << 10);
    // 16 MiB: more than the socket buffers and the limit hold.
    let mut received = 0;
    for _ in 0..256 {
        received += int(publisher.cmd(&["PUBLISH", "firehose", &payload]));
        if received > 0
            && publisher.cmd(&["PUBSUB", "NUMSUB", "firehose"])
                == V::Array(vec![b("firehose"), V::Int(0)])
        {
            break;
        }
    }
    eventually("the slow subscriber disconnected", || {
        publisher.cmd(&["PUBSUB", "NUMSUB", "firehose"]) == V::Array(vec![b("firehose"), V::Int(0)])
    });
    assert!(
        received < 256,
        "every message was accepted: no limit applied"
    );
    // The subscriber finds its connection closed after what reached it.
    sub.r
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        use std::io::Read;
        match sub.r.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) => panic!("the subscriber was not disconnected: {e}"),
        }
    }
    assert!(total < 256 * payload.len(), "{total}");
    assert_eq!(publisher.cmd(&["PING"]), V::Simple("PONG".into()));
}

#[test]
fn monitor_sees_other_clients_commands() {
    let s = server();
    let mut mon = s.raw();
    assert_eq!(mon.cmd(&["MONITOR"]), V::Simple("OK".into()));
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SET", "mk", "a b\"c"]), V::Simple("OK".into()));
    assert_eq!(c.cmd(&["AUTH", "secret"]), c_auth_err());
    assert_eq!(c.cmd(&["GET", "mk"]), b("a b\"c"));
    let V::Simple(line) = mon.read() else {
        panic!("not a status line")
    };
    assert!(
        line.ends_with(r#""SET" "mk" "a b\"c""#),
        "monitor line {line:?}"
    );
    assert!(line.contains(" [0 127.0.0.1:"), "{line}");
    // AUTH is not shown; the GET is next.
    let V::Simple(line) = mon.read() else {
        panic!("not a status line")
    };
    assert!(line.ends_with(r#""GET" "mk""#), "{line:?}");
}

fn c_auth_err() -> V {
    V::Err(
        "ERR AUTH <password> called without any password configured for the default user. \
         Are you sure your configuration is correct?"
            .into(),
    )
}

/// True when the server closed the connection: end of file (or a reset)
/// within 10 s, not a timeout.
fn closed_by_server(r: &mut common::Raw) -> bool {
    use std::io::Read;
    r.r.get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 1];
    match r.r.read(&mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}
