fn main() {
    let dir = std::env::args().nth(1).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let db = weft::Db::open(&dir, weft::Options::default()).unwrap();
    for i in 0..1000u32 {
        db.put(format!("k{i:05}"), format!("v{i}")).unwrap();
    }
    db.delete("k00005").unwrap();
    let s = db.snapshot();
    db.put("k00001", "new").unwrap();
    assert_eq!(db.get("k00001").unwrap().unwrap(), b"new");
    assert_eq!(
        db.get_opt("k00001", &weft::ReadOptions::new().snapshot(&s))
            .unwrap()
            .unwrap(),
        b"v1"
    );
    assert_eq!(db.get("k00005").unwrap(), None);
    let n = db.range::<&[u8], _>(..).unwrap().count();
    assert_eq!(n, 999);
    let r: Vec<_> = db
        .range("k00003".."k00008")
        .unwrap()
        .rev()
        .map(|r| String::from_utf8(r.unwrap().0).unwrap())
        .collect();
    assert_eq!(r, vec!["k00007", "k00006", "k00004", "k00003"]);
    println!("ok {:?}", db.stats().sequence);
}
