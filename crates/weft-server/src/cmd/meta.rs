//! Command metadata for `COMMAND` (INFO, DOCS, COUNT, LIST, GETKEYS):
//! flags, ACL categories, key specs, tips, documentation, in Redis 7's
//! reply shapes.
//!
//! The metadata is keyed by command name and kept apart from the command
//! table (`COMMANDS` in `cmd/mod.rs`), which says which commands exist:
//! `COMMAND` reports the table's commands, each with its metadata.
//! Redis's own metadata for its commands is generated into `meta_table.rs`
//! by `tools/gen_command_meta.py` from a redis-server 7.0, so a command
//! added to the table later finds its flags and key specs there already;
//! Weft's own commands are described in [`WEFT`]. A command described
//! nowhere gets a fallback ([`fallback`]): no flags, one key at argument 1
//! if it takes arguments, as most data commands do.

use super::meta_table::TABLE;
use super::{is, lookup, CmdError, CmdResult, Command, Ctx, COMMANDS};
use crate::resp::Out;

/// A reply tree, as the generated table writes it.
#[derive(Debug)]
pub enum D {
    /// A bulk string.
    S(&'static str),
    /// An integer.
    I(i64),
    /// An array.
    A(&'static [D]),
    /// A map.
    M(&'static [(&'static str, D)]),
}

impl D {
    fn write(&self, out: &mut Out) {
        match self {
            D::S(s) => out.bulk(s.as_bytes()),
            D::I(i) => out.int(*i),
            D::A(a) => {
                out.array(a.len());
                for d in *a {
                    d.write(out);
                }
            }
            D::M(m) => write_map(out, m),
        }
    }

    fn get(&self, key: &str) -> Option<&D> {
        match self {
            D::M(m) => m.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn int(&self) -> Option<i64> {
        match self {
            D::I(i) => Some(*i),
            _ => None,
        }
    }

    fn str(&self) -> Option<&'static str> {
        match self {
            D::S(s) => Some(s),
            _ => None,
        }
    }
}

fn write_map(out: &mut Out, m: &[(&str, D)]) {
    out.map(m.len());
    for (k, v) in m {
        out.bulk(k.as_bytes());
        v.write(out);
    }
}

/// One command's metadata.
#[derive(Debug)]
pub struct Meta {
    /// The name (`parent|sub` for a subcommand).
    pub name: &'static str,
    /// Arity as Redis counts it.
    pub arity: i64,
    /// Flags (`readonly`, `write`, `fast`, ...).
    pub flags: &'static [&'static str],
    /// First key, last key, step (the legacy key positions).
    pub keys: (i64, i64, i64),
    /// ACL categories.
    pub acl: &'static [&'static str],
    /// Tips (`nondeterministic_output`, request policies, ...).
    pub tips: &'static [&'static str],
    /// Key specs, each a map.
    pub key_specs: &'static [D],
    /// Subcommand names (`parent|sub`).
    pub subcommands: &'static [&'static str],
    /// The `COMMAND DOCS` map (summary, since, group, complexity,
    /// arguments, ...), subcommands excluded.
    pub docs: &'static [(&'static str, D)],
}

/// Weft's own commands.
pub static WEFT: &[Meta] = &[Meta {
    name: "weft.range",
    arity: -3,
    flags: &["readonly"],
    keys: (0, 0, 0),
    acl: &["@read", "@keyspace", "@slow"],
    tips: &[],
    key_specs: &[],
    subcommands: &[],
    docs: &[
        (
            "summary",
            D::S("Returns the string keys in [start, end) with their values, in key order"),
        ),
        ("since", D::S("0.1.0")),
        ("group", D::S("generic")),
        (
            "complexity",
            D::S("O(log(N)+M) where M is the number of keys returned"),
        ),
    ],
}];

static ONE_KEY: &[D] = &[D::M(&[
    ("flags", D::A(&[D::S("RW"), D::S("access"), D::S("update")])),
    (
        "begin_search",
        D::M(&[
            ("type", D::S("index")),
            ("spec", D::M(&[("index", D::I(1))])),
        ]),
    ),
    (
        "find_keys",
        D::M(&[
            ("type", D::S("range")),
            (
                "spec",
                D::M(&[
                    ("lastkey", D::I(0)),
                    ("keystep", D::I(1)),
                    ("limit", D::I(0)),
                ]),
            ),
        ]),
    ),
])];

/// The metadata of a command described nowhere: no flags; one key at
/// argument 1 when the command takes arguments.
pub fn fallback(c: &Command) -> Meta {
    let keyed = c.arity.unsigned_abs() >= 2;
    Meta {
        name: c.name,
        arity: i64::from(c.arity),
        flags: &[],
        keys: if keyed { (1, 1, 1) } else { (0, 0, 0) },
        acl: &["@slow"],
        tips: &[],
        key_specs: if keyed { ONE_KEY } else { &[] },
        subcommands: &[],
        docs: &[
            ("summary", D::S("")),
            ("since", D::S("0.1.0")),
            ("group", D::S("generic")),
        ],
    }
}

/// The metadata of command (or `parent|sub`) `name`, if described.
pub fn find(name: &str) -> Option<&'static Meta> {
    if let Ok(i) = TABLE.binary_search_by(|m| m.name.cmp(name)) {
        return Some(&TABLE[i]);
    }
    WEFT.iter().find(|m| m.name == name)
}

enum Found {
    Static(&'static Meta),
    Owned(Meta),
}

impl std::ops::Deref for Found {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        match self {
            Found::Static(m) => m,
            Found::Owned(m) => m,
        }
    }
}

fn meta_of(c: &Command) -> Found {
    match find(c.name) {
        Some(m) => Found::Static(m),
        None => Found::Owned(fallback(c)),
    }
}

fn strs_as_set(out: &mut Out, v: &[&str]) {
    out.set(v.len());
    for s in v {
        out.bulk(s.as_bytes());
    }
}

/// One `COMMAND INFO` entry: Redis 7's ten elements.
fn write_info(out: &mut Out, m: &Meta, arity: i64) {
    out.array(10);
    out.bulk(m.name.as_bytes());
    out.int(arity);
    strs_as_set(out, m.flags);
    out.int(m.keys.0);
    out.int(m.keys.1);
    out.int(m.keys.2);
    strs_as_set(out, m.acl);
    strs_as_set(out, m.tips);
    out.array(m.key_specs.len());
    for k in m.key_specs {
        k.write(out);
    }
    let subs: Vec<&Meta> = m.subcommands.iter().filter_map(|s| find(s)).collect();
    out.array(subs.len());
    for s in subs {
        write_info(out, s, s.arity);
    }
}

/// One `COMMAND DOCS` value: the doc map, with its subcommands' docs.
fn write_docs(out: &mut Out, m: &Meta) {
    let subs: Vec<&Meta> = m.subcommands.iter().filter_map(|s| find(s)).collect();
    out.map(m.docs.len() + usize::from(!subs.is_empty()));
    for (k, v) in m.docs {
        out.bulk(k.as_bytes());
        v.write(out);
    }
    if !subs.is_empty() {
        out.bulk(b"subcommands");
        out.map(subs.len());
        for s in subs {
            out.bulk(s.name.as_bytes());
            write_docs(out, s);
        }
    }
}

/// The keys of `args` (a whole command) by its key specs (legacy
/// positions when it has none).
fn keys_of(m: &Meta, args: &[Vec<u8>]) -> Vec<usize> {
    let n = args.len() as i64;
    let mut keys = Vec::new();
    if m.key_specs.is_empty() {
        let (first, last, step) = m.keys;
        if first > 0 {
            let last = if last < 0 { n + last } else { last };
            let mut i = first;
            while i <= last && i < n {
                keys.push(i as usize);
                i += step.max(1);
            }
        }
        return keys;
    }
    for spec in m.key_specs {
        let Some(begin) = spec.get("begin_search") else {
            continue;
        };
        let bspec = begin.get("spec");
        let start = match begin.get("type").and_then(D::str) {
            Some("index") => bspec.and_then(|s| s.get("index")).and_then(D::int),
            Some("keyword") => {
                let kw = bspec.and_then(|s| s.get("keyword")).and_then(D::str);
                let from = bspec
                    .and_then(|s| s.get("startfrom"))
                    .and_then(D::int)
                    .unwrap_or(1);
                kw.and_then(|kw| {
                    let hit = |i: &i64| is(&args[*i as usize], kw);
                    if from >= 0 {
                        (from.max(1)..n).find(hit)
                    } else {
                        (1..(n + from + 1).max(1)).rev().find(hit)
                    }
                    .map(|i| i + 1)
                })
            }
            _ => None,
        };
        let Some(start) = start else { continue };
        let Some(find) = spec.get("find_keys") else {
            continue;
        };
        let fspec = find.get("spec");
        let get = |k: &str| fspec.and_then(|s| s.get(k)).and_then(D::int).unwrap_or(0);
        match find.get("type").and_then(D::str) {
            Some("range") => {
                let (lastkey, step, limit) = (get("lastkey"), get("keystep").max(1), get("limit"));
                let last = if lastkey >= 0 {
                    start + lastkey
                } else if lastkey == -1 && limit > 1 {
                    start + (n - 1 - start) / limit
                } else {
                    n + lastkey
                };
                let mut i = start;
                while i <= last && i < n {
                    keys.push(i as usize);
                    i += step;
                }
            }
            Some("keynum") => {
                let numidx = start + get("keynumidx");
                let Some(count) = args.get(numidx as usize).and_then(|a| super::parse_i64(a))
                else {
                    continue;
                };
                let step = get("keystep").max(1);
                let mut i = start + get("firstkey");
                for _ in 0..count.max(0) {
                    if i >= n {
                        break;
                    }
                    keys.push(i as usize);
                    i += step;
                }
            }
            _ => {}
        }
    }
    keys
}

/// The positions in `args` (a whole request of command `c`) of the keys
/// it names, by its key specs: what `EXEC` locks before it runs a queued
/// command.
pub fn key_positions(c: &Command, args: &[Vec<u8>]) -> Vec<usize> {
    keys_of(&meta_of(c), args)
}

/// True when `c` reads or writes data (ACL category `@read` or `@write`):
/// one that names no key then reads or writes the whole database (`KEYS`,
/// `SCAN`, `DBSIZE`, `FLUSHDB`, ...).
pub fn touches_data(c: &Command) -> bool {
    meta_of(c)
        .acl
        .iter()
        .any(|cat| matches!(*cat, "@read" | "@write" | "@keyspace"))
}

/// `COMMAND [COUNT | INFO [name...] | DOCS [name...] | LIST [FILTERBY ...]
/// | GETKEYS cmd args... | HELP]`.
pub fn command(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let out = &mut *ctx.out;
    if a.len() == 1 {
        out.array(COMMANDS.len());
        for c in COMMANDS {
            write_info(out, &meta_of(c), i64::from(c.arity));
        }
        return Ok(());
    }
    let sub = &a[1];
    if is(sub, "count") && a.len() == 2 {
        out.int(COMMANDS.len() as i64);
    } else if is(sub, "info") {
        if a.len() == 2 {
            out.array(COMMANDS.len());
            for c in COMMANDS {
                write_info(out, &meta_of(c), i64::from(c.arity));
            }
        } else {
            out.array(a.len() - 2);
            for name in &a[2..] {
                match lookup(name) {
                    Some(c) => write_info(out, &meta_of(c), i64::from(c.arity)),
                    None => out.null_array(),
                }
            }
        }
    } else if is(sub, "docs") {
        let cmds: Vec<&Command> = if a.len() == 2 {
            COMMANDS.iter().collect()
        } else {
            a[2..].iter().filter_map(|n| lookup(n)).collect()
        };
        out.map(cmds.len());
        for c in cmds {
            out.bulk(c.name.as_bytes());
            write_docs(out, &meta_of(c));
        }
    } else if is(sub, "list") {
        let filter = match a.len() {
            2 => None,
            5 if is(&a[2], "filterby") => Some((&a[3], &a[4])),
            _ => return super::err(super::SYNTAX),
        };
        let mut names = Vec::new();
        for c in COMMANDS {
            let m = meta_of(c);
            let keep = match filter {
                None => true,
                Some((by, v)) if is(by, "pattern") => {
                    crate::glob::matches(&v.to_ascii_lowercase(), c.name.as_bytes())
                }
                Some((by, v)) if is(by, "aclcat") => {
                    let v = String::from_utf8_lossy(v).to_ascii_lowercase();
                    m.acl.iter().any(|cat| cat.trim_start_matches('@') == v)
                }
                Some((by, _)) if is(by, "module") => false,
                Some(_) => return super::err(super::SYNTAX),
            };
            if keep {
                names.push(c.name);
            }
        }
        out.array(names.len());
        for n in names {
            out.bulk(n.as_bytes());
        }
    } else if is(sub, "getkeys") && a.len() >= 3 {
        let Some(c) = lookup(&a[2]) else {
            return super::err("ERR Invalid command specified");
        };
        let args = &a[2..];
        let n = args.len() as i32;
        if (c.arity > 0 && n != c.arity) || (c.arity < 0 && n < -c.arity) {
            return super::err("ERR Invalid number of arguments specified for command");
        }
        let keys = keys_of(&meta_of(c), args);
        if keys.is_empty() {
            return super::err("ERR The command has no key arguments");
        }
        out.array(keys.len());
        for k in keys {
            out.bulk(&args[k]);
        }
    } else if is(sub, "help") && a.len() == 2 {
        let lines = [
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
            "HELP",
            "    Print this help.",
        ];
        out.array(lines.len());
        for l in lines {
            out.simple(l);
        }
    } else {
        return Err(CmdError(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(sub)
            )
            .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn the_table_is_sorted_and_describes_every_command_but_weft_s() {
        assert!(TABLE.windows(2).all(|w| w[0].name < w[1].name));
        for c in COMMANDS {
            let m = find(c.name);
            assert!(m.is_some(), "{} has no metadata", c.name);
            assert_eq!(m.map(|m| m.arity), Some(i64::from(c.arity)), "{}", c.name);
        }
    }

    #[test]
    fn keys_come_from_the_key_specs() {
        let keys = |cmd: &[&str]| {
            let a = args(cmd);
            let m = find(cmd[0]).unwrap();
            keys_of(m, &a)
                .into_iter()
                .map(|i| cmd[i].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&["get", "k"]), ["k"]);
        assert_eq!(keys(&["mset", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(keys(&["del", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(
            keys(&["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"]),
            ["d", "a", "b"]
        );
        assert_eq!(keys(&["blpop", "a", "b", "0"]), ["a", "b"]);
        assert!(keys(&["publish", "ch", "m"]).is_empty());
    }
}
