"""The README's Python example runs as written."""

import os
import re

import weft

README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


def test_readme_python_example(tmp_path, monkeypatch):
    text = open(README, encoding="utf-8").read()
    section = text.split("## Using it from Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    with weft.open(tmp_path / "my-db", codec="str") as db:
        assert list(db.items()) == [("n", "1"), ("pear", "green"), ("plum", "purple")]
        assert db.keyspace("users")["42"] == "alice"
