"""The adversarial corpus (issue 8): hostile submissions to exercise 02, graded as one batch per backend.

``tests/adversarial/items.yml`` lists the items: what each does and what the grader must make of it. Item
files end in ``.src`` so that neither pytest nor ruff ever loads them here (a smuggled conftest.py is one).
``base: reference`` items are the reference solution with the item's ``attack.py`` appended.

For each backend the corpus runs as ONE ``grade batch`` over a copy of the course in which five secrets are
planted: in the hidden suite, in the reference, in the grader's environment, in a file on the host, and in
another submission of the same batch. Then, per item: its verdict, score and message; exactly one record;
a wall time within the exercise's time budget plus 5 s (``walls.json`` keeps them). Per batch: the control
keeps full marks, no secret appears in anything the batch wrote, and no process, container or scratch folder
is left.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from docker_support import require_docker_image
from leftovers import kill_processes_with

from grader.classroom.batch import make_plan
from grader.classroom.grade import batch_grade
from grader.classroom.state.records import Record, RecordStore
from grader.core.course import load_course
from grader.core.results import ExerciseResult

pytestmark = pytest.mark.slow  # end to end: skipped by the fast tier, scripts/test -m 'not slow'

HERE = Path(__file__).parent / "adversarial"
REPO = Path(__file__).parent.parent
MANIFEST = yaml.safe_load((HERE / "items.yml").read_text())
ITEMS: dict[str, dict] = {item["id"]: item for item in MANIFEST["items"]}
EXERCISE = MANIFEST["exercise"]
CONTROL = "control"
MARKER = "distgpu-adversarial-daemon"
"""In the command line of every background process an item leaves on purpose."""
PLACEHOLDER = "@OTHER_SUBMISSION_CANARY@"


def local_sandbox() -> str | None:
    """None when the local runner sandboxes ranks here; else why not."""
    from grader.core import sandbox

    if sandbox.requested_mode() == "none":
        return "DISTGPU_SANDBOX=none"
    return sandbox.probe()


# ---------------------------------------------------------------------------------------------------------
# building the batch


def build_item(item: dict, dest: Path, reference: str, course_root: Path, canary: str) -> None:
    """Write the item's submission (a folder or a zip) at ``dest`` (without suffix)."""
    builder = item.get("build")
    if builder:
        BUILDERS[builder](dest, reference, course_root)
        return
    dest.mkdir(parents=True)
    for source in sorted((HERE / "items" / item["id"]).iterdir()):
        text = source.read_text().replace(PLACEHOLDER, canary)
        name = source.name.removesuffix(".src")
        if name == "attack.py" and item.get("base") == "reference":
            (dest / "allreduce.py").write_text(reference + "\n\n# --- the attack ---\n" + text)
        else:
            (dest / name).write_text(text)


def _zip(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16) | 0x10  # a symbolic link, as `zip -y` stores it
            archive.writestr(info, target)


def _zip_truncated(dest: Path, reference: str, course_root: Path) -> None:
    _zip(dest.with_suffix(".zip"), {"allreduce.py": reference.encode()})
    data = dest.with_suffix(".zip").read_bytes()
    dest.with_suffix(".zip").write_bytes(data[: len(data) // 2])


def _zip_bad_crc(dest: Path, reference: str, course_root: Path) -> None:
    path = dest.with_suffix(".zip")
    _zip(path, {"allreduce.py": reference.encode()})
    data = bytearray(path.read_bytes())
    data[data.index(b"allreduce.py") + len(b"allreduce.py") + 40] ^= 0xFF  # inside the deflated body
    path.write_bytes(bytes(data))


def _zip_traversal(dest: Path, reference: str, course_root: Path) -> None:
    members = {"../allreduce.py": reference.encode(), "/tmp/allreduce.py": reference.encode()}
    members["mallory/../../../allreduce.py"] = reference.encode()
    _zip(dest.with_suffix(".zip"), members)


def _zip_symlink(dest: Path, reference: str, course_root: Path) -> None:
    target = str(course_root / "solutions" / "02_ring_tree" / "allreduce.py")
    _zip(dest.with_suffix(".zip"), {}, links={"mallory/allreduce.py": target})


def _zip_bomb(dest: Path, reference: str, course_root: Path) -> None:
    _zip(dest.with_suffix(".zip"), {"allreduce.py": b"#" * (256 << 20)})  # 256 MiB: ~250 KiB zipped


def _zip_wrong_names(dest: Path, reference: str, course_root: Path) -> None:
    with zipfile.ZipFile(dest.with_suffix(".zip"), "w") as archive:
        for name in ("Allreduce.py", "allreduce.PY", "allreduce.py.txt", "allreduce (1)x.py"):
            archive.writestr(name, reference)
        archive.writestr(zipfile.ZipInfo("allreduce\x94.py"), reference)  # cp437 bytes, no UTF-8 flag


def _folder_symlink(dest: Path, reference: str, course_root: Path) -> None:
    dest.mkdir(parents=True)
    (dest / "allreduce.py").symlink_to(course_root / "solutions" / "02_ring_tree" / "allreduce.py")


BUILDERS = {
    "zip_truncated": _zip_truncated,
    "zip_bad_crc": _zip_bad_crc,
    "zip_traversal": _zip_traversal,
    "zip_symlink": _zip_symlink,
    "zip_bomb": _zip_bomb,
    "zip_wrong_names": _zip_wrong_names,
    "folder_symlink": _folder_symlink,
}


UNUSED_WORLD_SIZES = {8}
"""No item attacks at 8 ranks (they attack at 2, 3 and 6): the planted copy leaves that size out of the
exercise's parts, which halves the ranks every grading starts. The course's own suites keep it."""
TEST_TIMEOUT_S = 5
"""The planted copy's limit per test (the course gives students' slower machines 10 s; the reference's
slowest test here takes under 0.5 s): a dozen items hang on purpose, and each hang costs this long."""


def plant_course(root: Path, canaries: dict[str, str]) -> None:
    """A copy of the course with secrets in the hidden suite and the reference of the exercise, its parts
    run on the world sizes the items attack, with ``TEST_TIMEOUT_S`` per test."""
    root.mkdir(parents=True)
    catalogue = yaml.safe_load((REPO / "course.yml").read_text())
    for section in catalogue["sections"]:
        for exercise in section["exercises"]:
            if f"{exercise['number']:02d}" == EXERCISE:
                for part in exercise.get("parts", []):
                    part["world_sizes"] = [n for n in part["world_sizes"] if n not in UNUSED_WORLD_SIZES]
                    part["timeout"] = TEST_TIMEOUT_S
    (root / "course.yml").write_text(yaml.safe_dump(catalogue, sort_keys=False))
    ignore = shutil.ignore_patterns("__pycache__", ".grade")
    for tree in ("exercises", "solutions"):
        shutil.copytree(REPO / tree, root / tree, ignore=ignore)
    solution = root / "solutions" / "02_ring_tree"
    for name, kind in (("test_hidden.py", "hidden"), ("allreduce.py", "reference")):
        text = (solution / name).read_text()
        (solution / name).write_text(text + f'\n_SECRET = "{canaries[kind]}"  # planted by the corpus test\n')


# ---------------------------------------------------------------------------------------------------------
# running it


@dataclass
class CorpusRun:
    backend: str
    out: Path
    results: dict[str, ExerciseResult]
    records: dict[str, Record]
    record_files: dict[str, int]
    walls: dict[str, float]
    canaries: dict[str, str]
    written: dict[str, bytes]
    """Every file the batch wrote under out/ and its gradebook, by path: what instructors and students see."""
    left_processes: list[str]
    left_containers: list[str]
    left_scratch: list[str]
    budget_s: float = 0.0
    not_run: dict[str, str] = field(default_factory=dict)
    """Items left out of this backend's batch, with why."""


def _containers_left(root: Path) -> list[str]:
    import docker

    from grader.runners.docker import graders_containers

    client = docker.from_env()
    left = []
    for summary in graders_containers(client):
        if any(m.get("Source", "").startswith(str(root)) for m in summary.get("Mounts") or []):
            left.append(f"{summary['Id'][:12]} {summary.get('State')}")
            try:
                client.api.remove_container(summary["Id"], force=True)
            except docker.errors.NotFound:
                pass
    return left


def run_corpus(backend: str, root: Path) -> CorpusRun:
    canaries = {kind: f"DISTGPU-CANARY-{kind}-{secrets.token_hex(8)}" for kind in CANARY_KINDS}
    course_root, subs, out, home = (root / n for n in ("course", "subs", "out", "home"))
    plant_course(course_root, canaries)
    for folder in (subs, home):
        folder.mkdir()
    host_secret = root / "host" / "host-secret.txt"
    host_secret.parent.mkdir()
    host_secret.write_text(canaries["host"])
    reference = (REPO / "solutions" / "02_ring_tree" / "allreduce.py").read_text()
    sandbox_missing = local_sandbox() if backend == "local" else None
    if sandbox_missing and os.environ.get("CI"):  # CI installs bubblewrap: its items must attack, not xfail
        pytest.fail(f"the local sandbox does not work here ({sandbox_missing}); CI needs it")
    not_run = {}
    for item in MANIFEST["items"]:
        if item.get("local") == "sandbox" and sandbox_missing:
            not_run[item["id"]] = f"unbounded on the host without the local sandbox ({sandbox_missing})"
            continue
        build_item(item, subs / item["id"], reference, course_root, canaries["submission"])
    (subs / CONTROL).mkdir()
    (subs / CONTROL / "allreduce.py").write_text(reference)

    course = load_course(course_root / "course.yml")
    exercise = course.find(EXERCISE)
    plan = make_plan(course=course, exercise=exercise, backend=backend, device="cpu", workers=1, gpus=0)
    results: dict[str, ExerciseResult] = {}
    walls: dict[str, float] = {}
    clock = [time.monotonic()]

    def on_result(student: str, result: ExerciseResult) -> None:
        now = time.monotonic()
        walls[student], clock[0] = now - clock[0], now
        results[student] = result

    saved = {k: os.environ.get(k) for k in ("TMPDIR", "HOME", "DISTGPU_GRADER_SECRET", "GRADER_TOKEN")}
    cwd = Path.cwd()
    # Scratch outside /tmp and outside pytest's root-only folder: ranks (as nobody, in the local sandbox,
    # whose own /tmp is a tmpfs) must reach it.
    scratch = Path(tempfile.mkdtemp(prefix="distgpu-corpus-", dir="/var/tmp"))
    scratch.chmod(0o755)
    os.environ.update(
        TMPDIR=str(scratch),
        HOME=str(home),
        DISTGPU_GRADER_SECRET=canaries["env"],
        GRADER_TOKEN=canaries["env"],
    )
    tempfile.tempdir = None
    os.chdir(course_root)  # where an instructor runs `grade batch`
    try:
        batch_grade(
            plan=plan,
            submissions=subs,
            out=out,
            regrade=[],
            gradebook_url=f"sqlite:///{root / 'gradebook.db'}",
            late=False,
            on_start=lambda _n: clock.__setitem__(0, time.monotonic()),
            on_result=on_result,
        )
    finally:
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        tempfile.tempdir = None
        time.sleep(1.0)  # rank processes killed by their parent's death need a moment to go
        left_processes = kill_processes_with(MARKER, or_in_environment=canaries["env"])
        left_containers = _containers_left(root) if backend == "docker" else []
        for stray in STRAYS:  # what items write to the host's /tmp when nothing stops them
            Path("/tmp", stray).unlink(missing_ok=True)
    left_scratch = sorted(str(p) for p in scratch.glob("distgpu-*"))
    shutil.rmtree(scratch, ignore_errors=True)
    store = RecordStore(out / "records")
    (root / "walls.json").write_text(json.dumps(walls, indent=1))  # seconds per submission, for the record
    written = {str(p): p.read_bytes() for p in [*out.rglob("*"), root / "gradebook.db"] if p.is_file()}
    return CorpusRun(
        backend=backend,
        out=out,
        results=results,
        records={r.student: r for r in store.all()},
        record_files={s: len(list((out / "records").glob(f"{s}.json"))) for s in results},
        walls=walls,
        canaries=canaries,
        written=written,
        left_processes=left_processes,
        left_containers=left_containers,
        left_scratch=left_scratch,
        budget_s=exercise.timeout,
        not_run=not_run,
    )


CANARY_KINDS = ("hidden", "reference", "env", "host", "submission")
STRAYS = ("distgpu-answer-cache.txt", "distgpu-own-cache.txt", "results.json", "result.json", "report.xml")
STRAYS += ("grades.csv", "distgpu-disk-bomb.bin")


_RUNS: dict[str, CorpusRun] = {}


@pytest.fixture
def corpus(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> CorpusRun:
    """The batch of ``request.param``'s backend, graded once per session whatever order tests run in."""
    backend = request.param
    if backend not in _RUNS:
        if backend == "docker":
            require_docker_image()
        _RUNS[backend] = run_corpus(backend, tmp_path_factory.mktemp(f"corpus-{backend}"))
    return _RUNS[backend]


BACKENDS = ["local", "docker"]


def _item_params() -> list:
    params = []
    for backend in BACKENDS:
        for item in MANIFEST["items"]:
            marks = []
            if item.get(f"xfail_{backend}"):
                marks.append(pytest.mark.xfail(strict=True, reason=item[f"xfail_{backend}"]))
            params.append(pytest.param(backend, item["id"], marks=marks, id=f"{backend}-{item['id']}"))
    return params


# ---------------------------------------------------------------------------------------------------------
# per item


def _selects(selector: str, test) -> bool:  # type: ignore[no-untyped-def]
    if selector == "*":
        return True
    if selector.startswith("~"):
        return selector[1:] in test.name
    part, _, size = selector.partition("@")
    return part in test.part and (not size or test.world_size == int(size))


def allowed(status: str | list[str]) -> list[str]:
    """An item may accept more than one verdict where two are equally right (a fork bomb: out of memory or
    out of time, whichever limit it reaches first)."""
    return status if isinstance(status, list) else [status]


def expected_status(expect: dict, test) -> list[str]:  # type: ignore[no-untyped-def]
    return allowed(next(status for sel, status in expect["tests"].items() if _selects(sel, test)))


def expected_score(result: ExerciseResult, want: dict[str, list[str]]) -> float:
    """Points follow concepts: a concept scores only when every one of its tests is expected to pass."""
    concepts: dict[tuple[str, str], list] = {}
    for test in result.tests:
        concepts.setdefault((test.part, test.concept), []).append(test)
    return sum(
        sum(t.max_score for t in tests)
        for tests in concepts.values()
        if all(want[t.name] == ["passed"] for t in tests)
    )


@pytest.mark.parametrize(("corpus", "item_id"), _item_params(), indirect=["corpus"])
def test_item_gets_its_verdict_one_record_and_no_more_time(corpus: CorpusRun, item_id: str) -> None:
    if item_id in corpus.not_run:
        pytest.xfail(f"not run on {corpus.backend}: {corpus.not_run[item_id]}")
    item = ITEMS[item_id]
    expect = item["expect"] | item.get(f"expect_{corpus.backend}", {})
    assert item_id in corpus.results, f"{item_id} has no result: the batch did not reach it"
    result = corpus.results[item_id]
    got = {t.name: str(t.status) for t in result.tests}
    want = {t.name: expected_status(expect, t) for t in result.tests}
    wrong = [f"{n}: {got[n]} (expected {' or '.join(want[n])})" for n in got if got[n] not in want[n]]
    assert not wrong, "\n".join(wrong)
    assert str(result.verdict) in allowed(expect["verdict"])
    assert result.score == pytest.approx(expected_score(result, want))
    text = "\n".join([*(t.output for t in result.tests), *result.notes])
    assert any(m in text for m in allowed(expect["message"])), f"{expect['message']!r} not in:\n{text[:3000]}"
    assert corpus.record_files[item_id] == 1 and corpus.records[item_id].result == result
    leaked = [kind for kind, canary in corpus.canaries.items() if canary in str(result.to_dict())]
    assert not leaked, f"{item_id} got these secrets out: {leaked}"
    limit = corpus.budget_s + 5  # the exercise's time budget: no item may make grading take longer
    assert corpus.walls[item_id] <= limit, f"{item_id} took {corpus.walls[item_id]:.1f} s > {limit:.1f} s"


# ---------------------------------------------------------------------------------------------------------
# per batch


@pytest.mark.parametrize("corpus", BACKENDS, indirect=True)
def test_the_rest_of_the_batch_is_unaffected(corpus: CorpusRun) -> None:
    """The honest control and the honest victim keep full marks, and every submission got a record."""
    for student in (CONTROL, "cache_a_victim"):
        assert corpus.results[student].full_marks, corpus.results[student].to_dict()
    known_gaps = {i for i in ITEMS if ITEMS[i].get(f"xfail_{corpus.backend}")}  # may end without a record
    ran = {i for i in ITEMS if i not in corpus.not_run} | {CONTROL}
    assert ran - known_gaps <= set(corpus.records) <= ran


@pytest.mark.parametrize("corpus", BACKENDS, indirect=True)
def test_the_class_report_shows_where_runs_hung_and_every_student(corpus: CorpusRun) -> None:
    """The batch's report (issue 20): the corpus has hangs, so the report names where they were stuck."""
    page = corpus.written[str(corpus.out / "report" / "index.html")].decode()
    assert "Most common stuck location: <strong>" in page
    pages = [p for p in corpus.written if p.startswith(str(corpus.out / "report" / "students"))]
    assert len(pages) == len(corpus.records)


@pytest.mark.parametrize("corpus", BACKENDS, indirect=True)
def test_no_secret_reaches_anything_the_batch_wrote(corpus: CorpusRun) -> None:
    leaks = [
        f"{kind} secret in {path}"
        for path, data in corpus.written.items()
        for kind, canary in corpus.canaries.items()
        if canary.encode() in data and not _shows_submissions_to_the_instructor(path, kind)
    ]
    assert not leaks, leaks


def _shows_submissions_to_the_instructor(path: str, kind: str) -> bool:
    """The similarity report shows students' code side by side, to the instructor, and a submission beside
    the reference it matches: the canary planted in another submission's code, or in the reference, belongs
    there, and nowhere a student reads."""
    return kind in ("submission", "reference") and "/report/similarity" in path


@pytest.mark.parametrize("corpus", BACKENDS, indirect=True)
def test_no_process_container_or_scratch_folder_is_left(corpus: CorpusRun) -> None:
    assert corpus.left_processes == []
    assert corpus.left_containers == []
    assert corpus.left_scratch == []
