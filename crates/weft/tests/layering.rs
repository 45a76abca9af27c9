//! The engine's layering, checked: no import cycles between its source
//! files, and a `util` floor that imports nothing else from the crate.
//!
//! Each `.rs` file under `src/` is a module. A file *imports* another when
//! its code (comments and `#[cfg(test)] mod tests` excluded) names a path
//! into it: `crate::a::b`, `crate::{a::b, c}`, or `super::x`. A module's
//! own descendants and ancestors are not counted (a folder's `mod.rs` and
//! its children are one unit), so what is checked is the graph between
//! units a newcomer reads one at a time. A cycle in it means neither side
//! can be understood, tested or changed alone; the test names the cycle
//! and its edges.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every `.rs` file under `dir`, by module path.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension() != Some(std::ffi::OsStr::new("rs")) {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            out.insert(parts, path);
        }
    }
    out
}

/// A file's code without comments and without its unit-test module.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs of `ident::ident::…` starting at each occurrence of `prefix`.
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix) {
        let start = from + at;
        from = start + prefix.len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::b, c::{d, e}}`: the first segment of each item.
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let p: Vec<&str> = item.trim().split("::").map(str::trim).collect();
                if !p[0].is_empty() {
                    out.push(p);
                }
            }
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let p: Vec<&str> = rest[..end].split("::").filter(|s| !s.is_empty()).collect();
        if !p.is_empty() {
            out.push(p);
        }
    }
    out
}

/// The longest prefix of `path` that is a module; the crate root for an
/// item the root itself declares or re-exports (`crate::Options`).
fn resolve(all: &BTreeMap<Module, PathBuf>, path: &[String]) -> Option<Module> {
    let found = (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| all.contains_key(m));
    Some(found.unwrap_or_default())
}

/// A module's path as the source writes it (`crate` for the root).
fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

fn related(a: &Module, b: &Module) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The import graph between modules: ancestors and descendants excluded,
/// except that a path to an item of the crate root counts as an edge to it
/// (the root re-exports the public surface, which `util` must not reach).
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let all = modules(src);
    let mut edges = BTreeMap::new();
    for (module, path) in &all {
        if module
            .last()
            .is_some_and(|m| m == "tests" || m == "test_support")
        {
            continue;
        }
        let code = code_of(path);
        let mut deps = BTreeSet::new();
        for p in paths_after(&code, "crate::") {
            let p: Vec<String> = p.iter().map(|s| s.to_string()).collect();
            deps.extend(resolve(&all, &p));
        }
        // `super::super::x` from `a::b::c` is `a::x`.
        for p in paths_after(&code, "super::") {
            let ups = 1 + p.iter().take_while(|s| **s == "super").count();
            if ups > module.len() {
                continue;
            }
            let mut full: Module = module[..module.len() - ups].to_vec();
            full.extend(p.iter().skip(ups - 1).map(|s| s.to_string()));
            deps.extend(resolve(&all, &full));
        }
        deps.retain(|d| (d.is_empty() && !module.is_empty()) || !related(d, module));
        edges.insert(module.clone(), deps);
    }
    edges
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let Some((w, _)) = s.edges.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_cycles_between_modules() {
    let edges = graph(&src());
    assert!(edges.len() > 50, "found only {} modules", edges.len());
    let mut report = String::new();
    for component in cycles(&edges) {
        let members: BTreeSet<&Module> = component.iter().collect();
        report.push_str(&format!("cycle of {} modules:\n", component.len()));
        for m in &component {
            for d in &edges[m] {
                if members.contains(d) {
                    report.push_str(&format!("  {} -> {}\n", name(m), name(d)));
                }
            }
        }
    }
    assert!(report.is_empty(), "{report}");
}

#[test]
fn util_imports_nothing_else_from_the_crate() {
    let edges = graph(&src());
    let util = vec!["util".to_string()];
    assert!(edges.keys().filter(|m| m.starts_with(&util)).count() >= 5);
    let mut offending = Vec::new();
    for (m, deps) in &edges {
        if !m.starts_with(&util) {
            continue;
        }
        for d in deps {
            if !d.starts_with(&util) {
                offending.push(format!("{} -> {}", name(m), name(d)));
            }
        }
    }
    assert!(offending.is_empty(), "util reaches up: {offending:?}");
}

/// Calls that create, change or remove files or directories, or open them
/// behind the file-system layer's back.
fn file_operations_in(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for call in [
        "File::create",
        "File::open",
        "OpenOptions",
        "libc::fallocate",
        "libc::unlink",
    ] {
        // Whole names only: `TableFile::open` is not `File::open`.
        let whole = code
            .match_indices(call)
            .any(|(at, _)| !code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
        if whole {
            found.push(call.to_string());
        }
    }
    let mut rest = code;
    while let Some(at) = rest.find("std::fs::") {
        let after = &rest[at + "std::fs::".len()..];
        let ident: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // A function (`remove_file(`), not a type (`File`).
        if ident.starts_with(|c: char| c.is_ascii_lowercase()) {
            found.push(format!("std::fs::{ident}"));
        }
        rest = after;
    }
    found
}

#[test]
fn file_operations_go_through_the_file_system_layer() {
    let layer = vec!["util".to_string(), "fs".to_string()];
    let mut offending = Vec::new();
    for (m, path) in modules(&src()) {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if m.starts_with(&layer) || file == "tests.rs" || file == "test_support.rs" {
            continue;
        }
        for call in file_operations_in(&code_of(&path)) {
            offending.push(format!("{}: {call}", name(&m)));
        }
    }
    assert!(
        offending.is_empty(),
        "file operations outside util::fs (use the FileSystem the Core holds): {offending:?}"
    );
    // The check sees what it looks for.
    let seen = file_operations_in("let f = std::fs::File::create(p); std::fs::rename(a, b);");
    assert_eq!(seen, ["File::create", "std::fs::rename"]);
    assert!(file_operations_in("fn f(file: &std::fs::File) {}").is_empty());
    assert!(file_operations_in("TableFile::open(fs, dir)").is_empty());
}

/// The checker itself finds a cycle and a floor violation when there is
/// one (a test of the test: a parser that saw nothing would pass above).
#[test]
fn the_checker_sees_cycles_and_reaches_up() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("util")).unwrap();
    std::fs::create_dir_all(src.join("db")).unwrap();
    let files = [
        ("lib.rs", "mod a; mod b; mod util; mod db;"),
        ("a.rs", "use crate::b::Thing;"),
        ("b.rs", "use crate::{a::Other, util::x};"),
        ("util/mod.rs", "pub mod x; pub mod y;"),
        ("util/x.rs", "fn f() { crate::db::core::g(); }"),
        ("util/y.rs", "fn f(_: &crate::Options) {}"),
        (
            "db/mod.rs",
            "mod core; use self::core::g; // crate::a::ignored",
        ),
        ("db/core.rs", "use super::super::util::x;"),
    ];
    for (name, text) in files {
        std::fs::write(src.join(name), text).unwrap();
    }
    let edges = graph(src);
    let m = |s: &str| s.split("::").map(String::from).collect::<Module>();
    assert_eq!(edges[&m("a")], BTreeSet::from([m("b")]));
    assert_eq!(edges[&m("b")], BTreeSet::from([m("a"), m("util::x")]));
    assert!(edges[&Vec::new()].is_empty(), "the root's children");
    assert_eq!(edges[&m("util::x")], BTreeSet::from([m("db::core")]));
    assert_eq!(
        edges[&m("util::y")],
        BTreeSet::from([Vec::new()]),
        "the root"
    );
    assert_eq!(edges[&m("db")], BTreeSet::new(), "comments and children");
    assert_eq!(edges[&m("db::core")], BTreeSet::from([m("util::x")]));
    let found = cycles(&edges);
    assert_eq!(found.len(), 2, "{found:?}");
}
