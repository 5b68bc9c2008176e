"""Staging a submission takes the exercise's files and nothing else, from a folder or a zip."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from grader.core import submission
from grader.core.submission import Reason, stage


def test_zip_with_a_top_folder_is_accepted_and_traversal_ignored(tmp_path: Path) -> None:
    archive = tmp_path / "alice.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice/toy.py", "x = 1\n")
        zf.writestr("../toy.py", "evil\n")
        zf.writestr("alice/conftest.py", "evil\n")
        zf.writestr("a/b/toy.py", "too deep\n")
    notes = stage(archive, ("toy.py",), tmp_path / "impl").texts
    assert notes == [
        "refused '../toy.py': the path escapes the submission",
        "not taken (the exercise takes toy.py only): alice/conftest.py, a/b/toy.py",
    ]
    assert sorted(p.name for p in (tmp_path / "impl").iterdir()) == ["toy.py"]
    assert (tmp_path / "impl" / "toy.py").read_text() == "x = 1\n"


def test_folder_symlinks_and_other_files_are_not_taken(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "secret.py").write_text("secret\n")
    (tmp_path / "sub" / "toy.py").symlink_to(tmp_path / "secret.py")
    (tmp_path / "sub" / "pytest.ini").write_text("[pytest]\naddopts = -p evil\n")
    notes = stage(tmp_path / "sub", ("toy.py",), tmp_path / "impl").texts
    assert notes == [
        "toy.py is a symbolic link: symbolic links are not allowed, so it was not taken",
        "the submission has no toy.py",
        "not taken (the exercise takes toy.py only): pytest.ini",
    ]
    assert list((tmp_path / "impl").iterdir()) == []


def test_not_a_zip_is_a_note_not_a_crash(tmp_path: Path) -> None:
    bogus = tmp_path / "alice.zip"
    bogus.write_bytes(b"PK\x03\x04 not really")
    assert stage(bogus, ("toy.py",), tmp_path / "impl").texts == [
        "the archive is corrupt (not a zip file): nothing was graded",
        "the submission has no toy.py",
    ]


def zipped(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16) | 0x10  # S_IFLNK | 0777: how zip -y stores a link
            zf.writestr(info, target)
    return path


def staged(tmp_path: Path) -> dict[str, bytes]:
    """Every file under impl/ and, to show nothing escaped, any file written next to it."""
    return {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}


def test_traversal_absolute_paths_and_links_are_refused_with_a_reason(tmp_path: Path) -> None:
    archive = zipped(
        tmp_path / "mallory.zip",
        {"../toy.py": b"up\n", "/toy.py": b"root\n", "mallory/../../toy.py": b"up2\n", "C:/toy.py": b"c\n"},
        links={"toy.py": "/etc/passwd"},
    )
    notes = stage(archive, ("toy.py",), tmp_path / "out" / "impl").texts
    assert notes == [
        "refused '../toy.py': the path escapes the submission",
        "refused '/toy.py': the path escapes the submission",
        "refused 'mallory/../../toy.py': the path escapes the submission",
        "refused 'C:/toy.py': the path escapes the submission",
        "toy.py is a symbolic link: symbolic links are not allowed, so it was not taken",
        "the submission has no toy.py",
    ]
    assert staged(tmp_path / "out") == {}


def test_a_corrupt_member_is_a_note_not_a_traceback(tmp_path: Path) -> None:
    archive = zipped(tmp_path / "alice.zip", {"toy.py": b"x = 1\n" * 100})
    data = bytearray(archive.read_bytes())
    body = data.index(b"toy.py") + len(b"toy.py")  # the local header's name, then the deflated bytes
    data[body + 5] ^= 0xFF
    archive.write_bytes(bytes(data))
    notes = stage(archive, ("toy.py",), tmp_path / "impl").texts
    assert (
        len(notes) == 2
        and notes[0].startswith("the archive is corrupt (")
        and "nothing was graded" in notes[0]
    )
    assert notes[1] == "the submission has no toy.py"
    assert staged(tmp_path / "impl") == {}


def test_zip_bombs_are_refused_before_they_are_inflated(tmp_path: Path) -> None:
    bomb = zipped(tmp_path / "bomb.zip", {"toy.py": b"\0" * (64 << 20)})  # 64 MiB of zeros: ~64 KiB zipped
    assert bomb.stat().st_size < 1 << 20
    assert stage(bomb, ("toy.py",), tmp_path / "a").texts == [
        "toy.py is larger than 1 MiB, so it was not taken",
        "the submission has no toy.py",
    ]
    # A header that lies about the size: the reader stops at the cap, whatever the header says.
    liar = bytearray(bomb.read_bytes())
    size = (64 << 20).to_bytes(4, "little")
    assert liar.count(size) == 2  # the local header and the central directory both carry it
    liar = liar.replace(size, (100).to_bytes(4, "little"))
    (tmp_path / "liar.zip").write_bytes(bytes(liar))
    notes = stage(tmp_path / "liar.zip", ("toy.py",), tmp_path / "b").texts
    assert notes[0].startswith("the archive is corrupt (") and staged(tmp_path / "b") == {}
    many = zipped(tmp_path / "many.zip", {f"f{i}": b"" for i in range(10_001)})
    assert stage(many, ("toy.py",), tmp_path / "c").texts == [
        "the archive has more than 10000 members: nothing was graded",
        "the submission has no toy.py",
    ]


def test_wrong_and_non_utf8_names_are_not_taken_and_the_note_says_what_was_found(tmp_path: Path) -> None:
    folder = tmp_path / "bob"
    folder.mkdir()
    (folder / "Toy.py").write_text("x = 1\n")
    Path(folder.as_posix().encode().decode() + "/t\udcf6y.py").write_text("x\n")  # b"t\xf6y.py": not UTF-8
    assert stage(folder, ("toy.py",), tmp_path / "impl").texts == [
        "the submission has no toy.py (found Toy.py: names are case-sensitive)",
        "not taken (the exercise takes toy.py only): Toy.py, t\udcf6y.py",
    ]
    archive = tmp_path / "carol.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(zipfile.ZipInfo("carol/t\x94y.py"), b"x\n")  # cp437 bytes, no UTF-8 flag
        zf.writestr("carol/toy.py.txt", b"x\n")
    assert stage(archive, ("toy.py",), tmp_path / "impl2").texts == [
        "the submission has no toy.py",
        "not taken (the exercise takes toy.py only): carol/t\x94y.py, carol/toy.py.txt",
    ]


def uploads(tmp_path: Path) -> dict[str, Path]:
    """One upload of each kind: valid, and invalid for a refusal or a whole-upload reason."""
    (tmp_path / "valid").mkdir(parents=True)
    (tmp_path / "valid" / "toy.py").write_text("x = 1\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "toy.py").symlink_to(tmp_path / "valid" / "toy.py")
    (tmp_path / "bytes.zip").write_bytes(b"PK\x03\x04 cut")
    return {
        "valid": tmp_path / "valid",
        "linked": tmp_path / "linked",
        "empty": tmp_path / "empty",
        "missing": tmp_path / "nobody",
        "corrupt": tmp_path / "bytes.zip",
        "traversal": zipped(tmp_path / "up.zip", {"../toy.py": b"x\n", "toy.py": b"y\n"}),
        "readme": zipped(tmp_path / "readme.zip", {"a/README.md": b"in the cloud\n"}),
        "bomb": zipped(tmp_path / "bomb.zip", {"toy.py": b"\0" * (2 << 20)}),
    }


def test_the_verdict_comes_from_reason_codes_not_from_the_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reword every message staging writes: each upload's verdict (valid, or invalid for which reason) and
    the files taken stay the same."""

    def verdicts(where: Path) -> dict[str, tuple[Reason | None, tuple[str, ...]]]:
        found = {}
        for name, source in uploads(where).items():
            done = stage(source, ("toy.py",), where / "staged" / name)
            found[name] = (done.invalid.reason if done.invalid else None, done.taken)
        return found

    plain = verdicts(tmp_path / "plain")
    assert plain == {
        "valid": (None, ("toy.py",)),
        "linked": (Reason.LINK, ()),
        "empty": (Reason.EMPTY, ()),
        "missing": (Reason.MISSING, ()),
        "corrupt": (Reason.CORRUPT, ()),
        "traversal": (Reason.TRAVERSAL, ("toy.py",)),
        "readme": (Reason.NO_EXERCISE_FILE, ()),
        "bomb": (Reason.FILE_TOO_LARGE, ()),
    }
    reworded = submission.Note
    monkeypatch.setattr(submission, "Note", lambda reason, text: reworded(reason, f"[{reason}] {text[::-1]}"))
    assert verdicts(tmp_path / "reworded") == plain
