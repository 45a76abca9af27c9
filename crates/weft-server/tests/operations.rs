//! A server people run: passwords (AUTH, HELLO AUTH, NOAUTH, CONFIG SET
//! requirepass, slowed guessing), CONFIG, CLIENT, INFO sections and
//! per-command stats, COMMAND metadata, SLOWLOG, LATENCY, SHUTDOWN.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{TestServer, V};

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
const NOAUTH: &str = "NOAUTH Authentication required.";

fn ok() -> V {
    V::Simple("OK".into())
}

fn text(v: V) -> String {
    match v {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        V::Verbatim(t) => t,
        other => panic!("expected text, got {other:?}"),
    }
}

fn with_password(pw: &'static str) -> TestServer {
    TestServer::with(move |c| {
        c.threads = 2;
        c.requirepass = Some(pw.into());
    })
}

#[test]
fn a_password_is_required_checked_and_given_with_auth_or_hello() {
    let s = with_password("s3cret");
    let mut r = s.raw();
    // Before AUTH nothing runs, the plain GET/SET fast paths included.
    assert_eq!(r.cmd(&["GET", "k"]), V::Err(NOAUTH.into()));
    assert_eq!(r.cmd(&["SET", "k", "v"]), V::Err(NOAUTH.into()));
    assert_eq!(r.cmd(&["MSET", "k", "v"]), V::Err(NOAUTH.into()));
    assert_eq!(r.cmd(&["PING"]), V::Err(NOAUTH.into()));
    assert_eq!(r.cmd(&["AUTH", "wrong"]), V::Err(WRONGPASS.into()));
    assert_eq!(r.cmd(&["AUTH", "bob", "s3cret"]), V::Err(WRONGPASS.into()));
    assert_eq!(r.cmd(&["GET", "k"]), V::Err(NOAUTH.into()));
    assert_eq!(r.cmd(&["AUTH", "s3cret"]), ok());
    assert_eq!(r.cmd(&["GET", "k"]), V::Nil, "the refused SET wrote");
    assert_eq!(r.cmd(&["SET", "k", "v"]), ok());
    let mut r2 = s.raw();
    assert_eq!(r2.cmd(&["AUTH", "default", "s3cret"]), ok());
    assert_eq!(r2.cmd(&["GET", "k"]), V::bulk("v"));

    // HELLO: refused unauthenticated, checked with AUTH.
    let mut h = s.raw();
    match h.cmd(&["HELLO", "3"]) {
        V::Err(e) => assert!(e.starts_with("NOAUTH HELLO must be called"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.cmd(&["HELLO", "3", "AUTH", "default", "nope"]),
        V::Err(WRONGPASS.into())
    );
    assert_eq!(h.cmd(&["GET", "k"]), V::Err(NOAUTH.into()));
    match h.cmd(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "h"]) {
        V::Map(m) => assert!(m.contains(&(V::bulk("proto"), V::Int(3)))),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.cmd(&["GET", "k"]), V::bulk("v"));
    assert_eq!(h.cmd(&["CLIENT", "GETNAME"]), V::bulk("h"));

    // Real clients: the redis crate with and without the password.
    let url = |pw: &str| format!("redis://:{pw}@{}/", s.addr);
    let mut c = redis::Client::open(url("s3cret"))
        .unwrap()
        .get_connection()
        .unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    let bad = redis::Client::open(url("guess")).unwrap().get_connection();
    let e = bad.err().expect("a wrong password connected");
    assert_eq!(e.kind(), redis::ErrorKind::AuthenticationFailed, "{e}");
    let mut anon = s.conn();
    let e = redis::cmd("GET")
        .arg("k")
        .query::<Option<String>>(&mut anon)
        .unwrap_err();
    assert_eq!(e.code(), Some("NOAUTH"), "{e}");
    // RESP3 through HELLO 3 AUTH, as the crate sends it.
    let mut c3 = redis::Client::open(format!("redis://:s3cret@{}/?protocol=resp3", s.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c3).unwrap();
    assert_eq!(v, "v");

    let info = text(r.cmd(&["INFO", "stats"]));
    assert!(info.contains("acl_access_denied_auth:4\r\n"), "{info}");
}

#[test]
fn config_set_requirepass_takes_effect_for_new_connections() {
    let s = TestServer::with(|c| c.threads = 2);
    let mut old = s.raw();
    assert_eq!(old.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(old.cmd(&["CONFIG", "SET", "requirepass", "pw"]), ok());
    assert_eq!(
        old.cmd(&["CONFIG", "GET", "requirepass"]),
        V::Array(vec![V::bulk("requirepass"), V::bulk("pw")])
    );
    // Connections already in stay in.
    assert_eq!(old.cmd(&["GET", "a"]), V::bulk("1"));
    let mut new = s.raw();
    assert_eq!(new.cmd(&["GET", "a"]), V::Err(NOAUTH.into()));
    assert_eq!(new.cmd(&["AUTH", "nope"]), V::Err(WRONGPASS.into()));
    assert_eq!(new.cmd(&["AUTH", "pw"]), ok());
    assert_eq!(new.cmd(&["GET", "a"]), V::bulk("1"));
    // Cleared: new connections need nothing.
    assert_eq!(new.cmd(&["CONFIG", "SET", "requirepass", ""]), ok());
    assert_eq!(s.raw().cmd(&["GET", "a"]), V::bulk("1"));
}

/// Guesses from fresh connections (so no connection's own delay counts)
/// are answered at most `RATE` a second once the burst is spent.
#[test]
fn password_guesses_are_slowed_server_wide() {
    use weft_server::auth::{BURST, RATE};
    let s = with_password("right");
    const GUESSES: u32 = 40;
    let started = Instant::now();
    for i in 0..GUESSES {
        let mut r = s.raw();
        assert_eq!(
            r.cmd(&["AUTH", &format!("guess{i}")]),
            V::Err(WRONGPASS.into())
        );
    }
    let took = started.elapsed();
    let floor = Duration::from_secs(1) * (GUESSES - BURST) / RATE;
    assert!(
        took >= floor.mul_f64(0.9),
        "{GUESSES} wrong passwords answered in {took:?}, under {floor:?}"
    );
    // The right one still gets in (after its turn).
    let mut r = s.raw();
    assert_eq!(r.cmd(&["AUTH", "right"]), ok());
    let info = text(r.cmd(&["INFO", "stats"]));
    assert!(
        info.contains(&format!("acl_access_denied_auth:{GUESSES}\r\n")),
        "{info}"
    );
    // A held connection still answers in order once released: a
    // pipelined AUTH then PING.
    let mut p = s.raw();
    p.send(&["AUTH", "bad"]);
    p.send(&["PING"]);
    assert_eq!(p.read(), V::Err(WRONGPASS.into()));
    assert_eq!(p.read(), V::Err(NOAUTH.into()));
}

#[test]
fn info_everything_has_every_section_and_counts_commands() {
    let s = TestServer::with(|c| c.threads = 2);
    let mut r = s.raw();
    for _ in 0..3 {
        r.cmd(&["GET", "nokey"]);
    }
    r.cmd(&["SET", "k", "v"]);
    r.cmd(&["HSET", "k", "f", "v"]); // WRONGTYPE: a failed call
    r.cmd(&["GET"]); // arity: a rejected call
    r.cmd(&["NOSUCH"]);
    let mut other = s.raw();
    other.cmd(&["GET", "nokey"]); // another loop's counters
    let info = text(r.cmd(&["INFO", "everything"]));
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# CPU",
        "# Modules",
        "# Errorstats",
        "# Cluster",
        "# Keyspace",
        "# Weft",
        "# Commandstats",
    ] {
        assert!(info.contains(section), "{section} missing from {info}");
    }
    assert!(info.contains("role:master\r\n"), "{info}");
    assert!(info.contains("connected_slaves:0\r\n"), "{info}");
    // The offset is the engine's visible sequence (DESIGN §1.11), so
    // the writes above moved it.
    assert!(
        info.lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .is_some_and(|o| o.parse::<u64>().is_ok_and(|o| o > 0)),
        "{info}"
    );
    assert!(info.contains("used_cpu_user:"), "{info}");
    let line = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing from {info}"))
            .to_string()
    };
    assert!(
        line("cmdstat_get:").starts_with("cmdstat_get:calls=4,usec="),
        "{}",
        line("cmdstat_get:")
    );
    assert!(line("cmdstat_get:").ends_with(",rejected_calls=1,failed_calls=0"));
    assert!(line("cmdstat_hset:").contains("calls=1,"));
    assert!(line("cmdstat_hset:").ends_with(",rejected_calls=0,failed_calls=1"));
    assert!(line("cmdstat_set:").starts_with("cmdstat_set:calls=1,"));
    assert_eq!(line("errorstat_ERR:"), "errorstat_ERR:count=2");
    assert_eq!(line("errorstat_WRONGTYPE:"), "errorstat_WRONGTYPE:count=1");
    assert_eq!(line("total_error_replies:"), "total_error_replies:3");
    // The default sections leave out commandstats, as Redis's.
    let default = text(r.cmd(&["INFO"]));
    assert!(!default.contains("# Commandstats"));
    assert!(default.contains("# Errorstats"));
    assert!(text(r.cmd(&["INFO", "all"])).contains("# Commandstats"));
    let cpu = text(r.cmd(&["INFO", "cpu", "replication"]));
    assert!(cpu.starts_with("# Replication\r\n"), "{cpu}");
    assert!(cpu.contains("# CPU\r\n"), "{cpu}");
    // CONFIG RESETSTAT starts the counts over.
    assert_eq!(r.cmd(&["CONFIG", "RESETSTAT"]), ok());
    let info = text(r.cmd(&["INFO", "commandstats"]));
    assert!(!info.contains("cmdstat_get"), "{info}");
}

#[test]
fn command_info_and_docs_have_redis_7_shapes() {
    let s = TestServer::start();
    let mut r = s.raw();
    let V::Array(entries) = r.cmd(&["COMMAND", "INFO", "get", "mset", "nosuch"]) else {
        panic!("COMMAND INFO is not an array")
    };
    assert_eq!(entries.len(), 3);
    let V::Array(get) = &entries[0] else {
        panic!("{entries:?}")
    };
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], V::bulk("get"));
    assert_eq!(get[1], V::Int(2));
    assert_eq!(get[2], V::Array(vec![V::bulk("readonly"), V::bulk("fast")]));
    assert_eq!(&get[3..6], &[V::Int(1), V::Int(1), V::Int(1)]);
    let V::Array(specs) = &get[8] else { panic!() };
    assert_eq!(specs.len(), 1);
    let V::Array(mset) = &entries[1] else {
        panic!()
    };
    assert_eq!(&mset[3..6], &[V::Int(1), V::Int(-1), V::Int(2)]);
    assert_eq!(entries[2], V::NilArray);

    let V::Array(docs) = r.cmd(&["COMMAND", "DOCS", "get"]) else {
        panic!("COMMAND DOCS is not a map")
    };
    assert_eq!(docs[0], V::bulk("get"));
    let V::Array(doc) = &docs[1] else { panic!() };
    let pos = doc.iter().position(|v| *v == V::bulk("summary")).unwrap();
    assert_eq!(doc[pos + 1], V::bulk("Get the value of a key"));
    assert!(doc.contains(&V::bulk("arguments")));

    assert_eq!(
        r.cmd(&["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]),
        V::Array(vec![V::bulk("a"), V::bulk("b")])
    );
    let V::Array(names) = r.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "pub*"]) else {
        panic!()
    };
    assert_eq!(names, vec![V::bulk("publish"), V::bulk("pubsub")]);
    // RESP3: flags are a set, docs a map.
    r.cmd(&["HELLO", "3"]);
    let V::Array(e) = r.cmd(&["COMMAND", "INFO", "set"]) else {
        panic!()
    };
    let V::Array(set) = &e[0] else { panic!() };
    assert!(matches!(&set[2], V::Set(f) if f.contains(&V::bulk("write"))));
    assert!(matches!(r.cmd(&["COMMAND", "DOCS", "set"]), V::Map(_)));
}

#[test]
fn client_list_info_and_kill_by_address() {
    let s = TestServer::with(|c| c.threads = 2);
    let mut me = s.raw();
    me.cmd(&["CLIENT", "SETNAME", "admin"]);
    let mut victim = s.raw();
    let V::Int(vid) = victim.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    let list = text(me.cmd(&["CLIENT", "LIST"]));
    assert_eq!(list.lines().count(), 2, "{list}");
    let vline = list
        .lines()
        .find(|l| l.starts_with(&format!("id={vid} ")))
        .unwrap();
    assert!(
        vline.contains(" cmd=client|id") || vline.contains(" cmd=client "),
        "{vline}"
    );
    let addr = vline
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    let info = text(me.cmd(&["CLIENT", "INFO"]));
    assert!(info.contains(" name=admin "), "{info}");
    assert_eq!(
        me.cmd(&["CLIENT", "KILL", "127.0.0.1:1"]),
        V::Err("ERR No such client".into())
    );
    assert_eq!(me.cmd(&["CLIENT", "KILL", &addr]), ok());
    assert!(closed_by_server(&mut victim));
    let list = text(me.cmd(&["CLIENT", "LIST", "ID", &vid.to_string()]));
    assert!(list.is_empty(), "{list}");
    // SKIPME defaults to yes: killing by this client's own address spares it.
    let mine = text(me.cmd(&["CLIENT", "INFO"]));
    let myaddr = mine
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert_eq!(me.cmd(&["CLIENT", "KILL", "ADDR", &myaddr]), V::Int(0));
    assert_eq!(me.cmd(&["PING"]), V::Simple("PONG".into()));
}

#[test]
fn config_get_set_slowlog_and_latency() {
    let s = TestServer::start();
    let mut r = s.raw();
    let V::Array(kv) = r.cmd(&["CONFIG", "GET", "slowlog-*"]) else {
        panic!()
    };
    assert_eq!(
        kv,
        vec![
            V::bulk("slowlog-log-slower-than"),
            V::bulk("10000"),
            V::bulk("slowlog-max-len"),
            V::bulk("128")
        ]
    );
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "port", "1"]),
        V::Err(
            "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable \
             config"
                .into()
        )
    );
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "nosuch", "1"]),
        V::Err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'".into())
    );
    // All or nothing: the bad second value leaves the first unset.
    assert!(matches!(
        r.cmd(&["CONFIG", "SET", "slowlog-max-len", "5", "maxclients", "x"]),
        V::Err(_)
    ));
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "slowlog-max-len"]),
        V::Array(vec![V::bulk("slowlog-max-len"), V::bulk("128")])
    );
    assert_eq!(
        r.cmd(&[
            "CONFIG",
            "SET",
            "slowlog-log-slower-than",
            "0",
            "slowlog-max-len",
            "3"
        ]),
        ok()
    );
    for i in 0..5 {
        r.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(r.cmd(&["SLOWLOG", "LEN"]), V::Int(3));
    let V::Array(entries) = r.cmd(&["SLOWLOG", "GET", "1"]) else {
        panic!()
    };
    assert_eq!(entries.len(), 1);
    let V::Array(e) = &entries[0] else { panic!() };
    assert_eq!(e.len(), 6);
    // The newest: the SLOWLOG LEN before this GET.
    assert_eq!(e[3], V::Array(vec![V::bulk("SLOWLOG"), V::bulk("LEN")]));
    assert_eq!(r.cmd(&["SLOWLOG", "RESET"]), ok());
    r.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    r.cmd(&["SLOWLOG", "RESET"]);
    assert_eq!(r.cmd(&["SLOWLOG", "LEN"]), V::Int(0));

    assert_eq!(r.cmd(&["LATENCY", "LATEST"]), V::Array(vec![]));
    assert_eq!(r.cmd(&["LATENCY", "HISTORY", "command"]), V::Array(vec![]));
    assert_eq!(r.cmd(&["LATENCY", "RESET"]), V::Int(0));
    assert!(matches!(r.cmd(&["LATENCY", "DOCTOR"]), V::Bulk(_)));
    // A 1 ms threshold: a SAVE (a checkpoint with fsyncs) is recorded.
    r.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    for _ in 0..20 {
        r.cmd(&["SAVE"]);
        if r.cmd(&["LATENCY", "LATEST"]) != V::Array(vec![]) {
            break;
        }
    }
    let V::Array(latest) = r.cmd(&["LATENCY", "LATEST"]) else {
        panic!()
    };
    let V::Array(ev) = &latest[0] else { panic!() };
    assert_eq!(ev[0], V::bulk("command"));
    assert_eq!(r.cmd(&["LATENCY", "RESET", "command"]), V::Int(1));
}

#[test]
fn shutdown_closes_the_engine_and_ends_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = TestServer::at(dir.path(), |c| c.threads = 2);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["SET", "kept", "yes"]), ok());
    assert_eq!(
        r.cmd(&["SHUTDOWN", "ABORT"]),
        V::Err("ERR No shutdown in progress.".into())
    );
    // The redis crate sees the connection close instead of a reply.
    let mut c = s.conn();
    let e = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.is_io_error() || e.is_connection_dropped(), "{e:?}");
    let ran = s
        .wait_exit(Duration::from_secs(10))
        .expect("run did not return");
    ran.unwrap();
    assert!(closed_by_server(&mut r));
    // The database was closed cleanly: it opens again with the write.
    let s2 = TestServer::at(dir.path(), |_| {});
    assert_eq!(s2.raw().cmd(&["GET", "kept"]), V::bulk("yes"));
    // SHUTDOWN SAVE leaves a checkpoint behind.
    let mut r2 = s2.raw();
    r2.send(&["SHUTDOWN", "SAVE"]);
    assert!(closed_by_server(&mut r2));
    let mut s2 = s2;
    s2.wait_exit(Duration::from_secs(10))
        .expect("run did not return")
        .unwrap();
    let saves = weft_server::default_save_dir(dir.path());
    assert!(
        std::fs::read_dir(&saves).unwrap().count() >= 1,
        "no checkpoint in {}",
        saves.display()
    );
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
