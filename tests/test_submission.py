"""Staging a submission takes the exercise's files and nothing else, from a folder or a zip."""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader.submission import stage


def test_zip_with_a_top_folder_is_accepted_and_traversal_ignored(tmp_path: Path) -> None:
    archive = tmp_path / "alice.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice/toy.py", "x = 1\n")
        zf.writestr("../toy.py", "evil\n")
        zf.writestr("alice/conftest.py", "evil\n")
        zf.writestr("a/b/toy.py", "too deep\n")
    notes = stage(archive, ("toy.py",), tmp_path / "impl")
    assert notes == []
    assert sorted(p.name for p in (tmp_path / "impl").iterdir()) == ["toy.py"]
    assert (tmp_path / "impl" / "toy.py").read_text() == "x = 1\n"


def test_folder_symlinks_and_other_files_are_not_taken(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "secret.py").write_text("secret\n")
    (tmp_path / "sub" / "toy.py").symlink_to(tmp_path / "secret.py")
    (tmp_path / "sub" / "pytest.ini").write_text("[pytest]\naddopts = -p evil\n")
    notes = stage(tmp_path / "sub", ("toy.py",), tmp_path / "impl")
    assert notes == ["the submission has no toy.py"]
    assert list((tmp_path / "impl").iterdir()) == []


def test_not_a_zip_is_a_note_not_a_crash(tmp_path: Path) -> None:
    bogus = tmp_path / "alice.zip"
    bogus.write_bytes(b"PK\x03\x04 not really")
    assert stage(bogus, ("toy.py",), tmp_path / "impl") == [
        f"{bogus} is neither a folder nor a zip archive: nothing was graded"
    ]
