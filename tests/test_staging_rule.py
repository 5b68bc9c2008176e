"""One staging rule for a folder, a zip, a tar archive and a single file: where the exercise's files may
sit, which copy is taken, and what is named when the upload is ambiguous (grader/core/submission.py)."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader.core import upload
from grader.core.submission import Reason, Staged, stage

FILES = ("toy.py", "pair.py")
KINDS = ("folder", "zip", "tar.gz", "TAR")


def make_upload(
    kind: str, where: Path, members: dict[str, bytes], links: dict[str, str] | None = None
) -> Path:
    """An upload of ``kind`` at ``where`` holding ``members`` (path: bytes) and ``links`` (path: target)."""
    links = links or {}
    if kind == "folder":
        for name, data in members.items():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            (where / name).write_bytes(data)
        for name, target in links.items():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            (where / name).symlink_to(target)
        return where
    if kind == "zip":
        path = where.with_suffix(".zip")
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
            for name, target in links.items():
                info = zipfile.ZipInfo(name)
                info.external_attr = (0o120777 << 16) | 0x10  # S_IFLNK | 0777: how zip -y stores a link
                zf.writestr(info, target)
        return path
    path = where.with_suffix(".tar.gz" if kind == "tar.gz" else ".TAR")
    with tarfile.open(path, "w:gz" if kind == "tar.gz" else "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tf.addfile(info)
    return path


def staged(
    kind: str, tmp_path: Path, members: dict[str, bytes], **links: str
) -> tuple[Staged, dict[str, bytes]]:
    source = make_upload(
        kind, tmp_path / "alice", members, {k.replace("_", "."): v for k, v in links.items()}
    )
    done = stage(source, FILES, tmp_path / "impl")
    return done, {p.name: p.read_bytes() for p in (tmp_path / "impl").iterdir()}


@pytest.mark.parametrize("kind", KINDS)
def test_one_top_folder_is_read_alike_in_every_kind_of_upload(kind: str, tmp_path: Path) -> None:
    done, taken = staged(
        kind, tmp_path, {"alice/toy.py": b"t\n", "alice/pair.py": b"p\n", "alice/x/deep.py": b""}
    )
    assert done.invalid is None and done.taken == FILES
    assert taken == {"toy.py": b"t\n", "pair.py": b"p\n"}
    assert done.leftovers == ("alice/x/deep.py",)
    assert done.texts == ["not taken (the exercise takes toy.py, pair.py only): alice/x/deep.py"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_courses_own_files_beside_the_exercises_are_not_left_over(kind: str, tmp_path: Path) -> None:
    """A student's checkout holds the README and the public tests beside the files they edit: saying
    'not taken' of those on every `grade exercise` is noise. Deeper, or named otherwise, they are listed."""
    members = {n: b"x\n" for n in ("a/toy.py", "a/pair.py", "a/README.md", "a/notes.txt", "a/x/README.md")}
    source = make_upload(kind, tmp_path / "alice", members)
    done = stage(source, FILES, tmp_path / "impl", given=frozenset({"README.md", "test_public.py"}))
    assert done.invalid is None and done.taken == FILES
    assert done.leftovers == ("a/notes.txt", "a/x/README.md")


@pytest.mark.parametrize("kind", KINDS)
def test_two_top_folders_with_the_files_name_the_ambiguity(kind: str, tmp_path: Path) -> None:
    done, taken = staged(kind, tmp_path, {"stub/toy.py": b"raise\n", "solution/toy.py": b"ok\n"})
    assert done.invalid is not None and done.invalid.reason is Reason.AMBIGUOUS and taken == {}
    assert "stub/toy.py" in done.invalid.text and "solution/toy.py" in done.invalid.text


@pytest.mark.parametrize("kind", KINDS)
def test_a_copy_at_the_top_and_one_in_a_folder_are_two_candidates(kind: str, tmp_path: Path) -> None:
    done, _ = staged(kind, tmp_path, {"toy.py": b"a\n", "old/toy.py": b"b\n"})
    assert done.invalid is not None and done.invalid.reason is Reason.AMBIGUOUS
    assert "toy.py, old/toy.py" in done.invalid.text or "old/toy.py, toy.py" in done.invalid.text


@pytest.mark.parametrize("kind", KINDS)
def test_the_exact_name_wins_over_renamed_copies(kind: str, tmp_path: Path) -> None:
    done, taken = staged(kind, tmp_path, {"toy (1).py": b"old\n", "toy.py": b"new\n", "toy-2.py": b"older\n"})
    assert done.invalid is None and taken == {"toy.py": b"new\n"}
    assert sorted(done.leftovers) == ["toy (1).py", "toy-2.py"]
    assert [n.reason for n in done.notes] == [Reason.ABSENT, Reason.LEFTOVER]


@pytest.mark.parametrize("kind", KINDS)
def test_one_renamed_copy_is_taken_with_a_note(kind: str, tmp_path: Path) -> None:
    done, taken = staged(kind, tmp_path, {"bob/toy (1).py": b"mine\n", "bob/pair-1.py": b"p\n"})
    assert done.invalid is None and taken == {"toy.py": b"mine\n", "pair.py": b"p\n"}
    assert done.texts == [
        "took bob/toy (1).py as toy.py (a renamed copy: the upload has no toy.py)",
        "took bob/pair-1.py as pair.py (a renamed copy: the upload has no pair.py)",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_two_renamed_copies_without_the_exact_name_are_invalid_and_named(kind: str, tmp_path: Path) -> None:
    done, taken = staged(kind, tmp_path, {"toy (1).py": b"a\n", "toy-1.py": b"b\n", "pair.py": b"p\n"})
    assert done.invalid is not None and done.invalid.reason is Reason.AMBIGUOUS and taken == {}
    assert "toy (1).py" in done.invalid.text and "toy-1.py" in done.invalid.text


def test_the_same_name_twice_in_one_zip_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "twice.zip"
    with zipfile.ZipFile(path, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr("toy.py", b"a\n")
        zf.writestr("toy.py", b"b\n")
    done = stage(path, FILES, tmp_path / "impl")
    assert done.invalid is not None and done.invalid.reason is Reason.AMBIGUOUS
    assert done.invalid.text == "toy.py is in the upload 2 times (toy.py, toy.py): keep one"


def test_a_single_file_named_like_an_exercise_file_is_an_upload(tmp_path: Path) -> None:
    (tmp_path / "toy.py").write_text("x\n")
    (tmp_path / "pair (2).py").write_text("y\n")
    (tmp_path / "notes.txt").write_text("z\n")
    assert stage(tmp_path / "toy.py", FILES, tmp_path / "a").taken == ("toy.py",)
    renamed = stage(tmp_path / "pair (2).py", FILES, tmp_path / "b")
    assert renamed.taken == ("pair.py",) and renamed.notes[0].reason is Reason.RENAMED
    other = stage(tmp_path / "notes.txt", FILES, tmp_path / "c")
    assert other.invalid is not None and other.invalid.reason is Reason.NOT_AN_UPLOAD


@pytest.mark.parametrize("kind", KINDS)
def test_links_and_escaping_paths_are_refused_alike(kind: str, tmp_path: Path) -> None:
    done, taken = staged(kind, tmp_path, {"pair.py": b"p\n"}, toy_py="/etc/passwd")
    assert taken == {"pair.py": b"p\n"}
    assert done.notes[0] == done.notes[0].__class__(
        Reason.LINK, "toy.py is a symbolic link: symbolic links are not allowed, so it was not taken"
    )
    if kind != "folder":
        path = make_upload(kind, tmp_path / "mallory", {"../toy.py": b"x\n", "pair.py": b"p\n"})
        escaping = stage(path, FILES, tmp_path / "impl2")
        assert escaping.invalid is not None and escaping.invalid.reason is Reason.TRAVERSAL


@pytest.mark.parametrize("kind", ["tar.gz", "TAR"])
def test_tar_archives_are_read_under_the_zip_limits(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = make_upload(kind, tmp_path / "big", {"toy.py": b"\0" * (upload.MAX_FILE_BYTES + 1)})
    assert stage(big, FILES, tmp_path / "a").invalid == stage(big, FILES, tmp_path / "a").notes[0]
    assert stage(big, FILES, tmp_path / "a").notes[0].reason is Reason.FILE_TOO_LARGE
    monkeypatch.setattr(upload, "MAX_UNPACKED_BYTES", 64 << 10)
    bomb = make_upload(kind, tmp_path / "bomb", {"a.bin": b"\0" * (128 << 10), "toy.py": b"x\n"})
    refused = stage(bomb, FILES, tmp_path / "b")
    assert refused.invalid is not None and refused.invalid.reason is Reason.ARCHIVE_TOO_LARGE
    assert refused.taken == ()
    monkeypatch.setattr(upload, "MAX_ENTRIES", 3)
    many = make_upload(kind, tmp_path / "many", {f"f{i}": b"" for i in range(4)})
    assert stage(many, FILES, tmp_path / "c").invalid.reason is Reason.TOO_MANY_MEMBERS  # type: ignore[union-attr]


def test_a_truncated_tar_is_corrupt_and_gives_nothing(tmp_path: Path) -> None:
    noise = bytes(range(256)) * 40 + os.urandom(20_000)  # what gzip cannot shrink: the cut falls in it
    whole = make_upload("tar.gz", tmp_path / "cut", {"pair.py": b"p\n", "toy.py": noise})
    whole.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    done = stage(whole, FILES, tmp_path / "impl")
    assert done.invalid is not None and done.invalid.reason is Reason.CORRUPT
    assert done.taken == () and list((tmp_path / "impl").iterdir()) == []
