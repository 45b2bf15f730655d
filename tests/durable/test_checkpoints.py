"""Checkpoints of an attempt's managed roots: capture, dedup, incremental reads, restore (R-CKPT-1, R-CKPT-2)."""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path

import pytest

from agentcompass_dagster.durable import file_tree
from agentcompass_dagster.durable.checkpoints import CheckpointError, CheckpointStore
from agentcompass_dagster.runtime.store.redact import REDACTED

SECRET = "sk-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kL9n"  # 40 letters and digits after the prefix


def blobs(store: CheckpointStore) -> dict[str, bytes]:
    """Every blob's digest and decompressed content."""
    return {
        path.parent.name + path.name: zlib.decompress(path.read_bytes()) for path in (store.root / "blobs").glob("*/*")
    }


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry below root (root included) with its type, mode, mtime, inode and bytes or link target."""
    snap: dict[str, tuple[object, ...]] = {}
    for directory, dirnames, filenames in os.walk(root):
        for name in ["", *dirnames, *filenames]:
            path = Path(directory, name) if name else Path(directory)
            st = path.lstat()
            content = os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else b""
            snap[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, st.st_ino, content)
    return snap


def write_tree(root: Path, n: int) -> list[Path]:
    files = []
    for i in range(n):
        path = root / f"d{i % 10}" / f"f{i:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" * 20)
        files.append(path)
    return files


def test_identical_content_is_stored_once(tmp_path: Path) -> None:
    """R-CKPT-1: blobs are named by SHA-256, so one content in two files and in two checkpoints is one blob."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.py").write_text("print('same')\n")
    (work / "b.py").write_text("print('same')\n")
    store = CheckpointStore(tmp_path / "store")
    first = store.capture(1, {"work": work})
    (work / "c.py").write_text("print('same')\n")
    second = store.capture(2, {"work": work})

    digest = hashlib.sha256(b"print('same')\n").hexdigest()
    assert {e.digest for e in second.roots["work"].values()} == {first.roots["work"]["a.py"].digest} == {digest}
    assert blobs(store) == {digest: b"print('same')\n"}
    assert store.last_capture_stats is not None and store.last_capture_stats.blobs_written == 0


def test_manifest_records_path_mode_mtime_digest_and_stat(tmp_path: Path) -> None:
    """R-CKPT-1: one manifest per checkpoint, written atomically, with path, size, mode, mtime_ns, digest and
    the stat tuple of each file, and the mode of every directory (an empty one too)."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "empty").mkdir()
    main = work / "src" / "main.py"
    main.write_bytes(b"x = 1\n")
    main.chmod(0o640)
    store = CheckpointStore(tmp_path / "store")
    assert store.seqs() == [] and store.latest() is None

    manifest = store.capture(7, {"work": work})

    st = main.stat()
    entry = manifest.roots["work"]["src/main.py"]
    assert entry.digest == hashlib.sha256(b"x = 1\n").hexdigest()
    assert (entry.size, entry.mode, entry.mtime_ns) == (6, 0o640, st.st_mtime_ns)
    assert entry.stat == (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    assert set(manifest.dirs["work"]) == {"src", "empty"}
    assert manifest.seq == 7 and manifest.created_at and manifest.excluded == 0 and manifest.skipped == 0
    assert sorted(p.name for p in (store.root / "manifests").iterdir()) == ["00000007.json"]
    assert store.seqs() == [7] and store.latest() == 7
    assert store.manifest(7) == manifest
    assert not list((store.root / "blobs").glob(".*")), "no temp file is left behind"
    with pytest.raises(CheckpointError, match="no checkpoint 8"):
        store.manifest(8)


def test_file_names_that_look_secret_keep_their_entries(tmp_path: Path) -> None:
    """R-CKPT-1: the manifest is not run through key-based redaction, which would blank the entry of a
    file whose name contains "token" or "password"."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("tokenizer.json", "password_reset.py", "api_key_loader.py"):
        (work / name).write_text(name)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    for path in list(work.iterdir()):
        path.unlink()
    CheckpointStore(tmp_path / "store").restore(1, {"work": work})  # the manifest as read back from disk
    assert {p.name: p.read_text() for p in work.iterdir()} == {
        name: name for name in ("tokenizer.json", "password_reset.py", "api_key_loader.py")
    }


def test_second_capture_reads_only_the_changed_files(tmp_path: Path) -> None:
    """R-CKPT-1: after 10 of 1,000 files change, the next capture opens exactly those 10 and takes the other
    digests from the previous manifest by stat; a new store object finds that manifest on disk."""
    work = tmp_path / "work"
    files = write_tree(work, 1000)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    assert store.last_capture_stats is not None and store.last_capture_stats.files_read == 1000

    for path in files[::100]:
        path.write_text(path.read_text() + "changed\n")
    second = store.capture(2, {"work": work})
    stats = store.last_capture_stats
    assert (stats.files_read, stats.files_reused, stats.blobs_written) == (10, 990, 10)
    assert stats.bytes_read == sum(p.stat().st_size for p in files[::100])
    assert second.roots["work"]["d0/f0000.txt"].digest == hashlib.sha256(files[0].read_bytes()).hexdigest()

    for path in files[5::100]:
        path.write_text("rewritten\n")
    reopened = CheckpointStore(tmp_path / "store")
    reopened.capture(3, {"work": work})
    assert reopened.last_capture_stats is not None
    assert (reopened.last_capture_stats.files_read, reopened.last_capture_stats.files_reused) == (10, 990)


def test_a_capture_of_unchanged_files_names_the_reference_and_writes_no_manifest(tmp_path: Path) -> None:
    """R-CKPT-1: a step that changed no file costs a walk of stats: the capture returns the checkpoint the
    files are still at and writes nothing; a touched mtime or a new empty directory is a change (restore
    brings both back), and a manifest a crashed process left at the seq is replaced, never kept stale."""
    work = tmp_path / "work"
    write_tree(work, 20)
    store = CheckpointStore(tmp_path / "store")
    assert store.capture(1, {"work": work}).seq == 1
    manifest_bytes = (store.root / "manifests" / "00000001.json").read_bytes()
    assert store.capture(2, {"work": work}).seq == 1
    assert store.seqs() == [1] and (store.root / "manifests" / "00000001.json").read_bytes() == manifest_bytes
    assert CheckpointStore(tmp_path / "store").capture(3, {"work": work}).seq == 1

    os.utime(work / "d0" / "f0000.txt", ns=(1, 1))
    assert store.capture(4, {"work": work}).seq == 4
    (work / "empty").mkdir()
    assert store.capture(5, {"work": work}).seq == 5

    (store.root / "manifests" / "00000007.json").write_bytes(manifest_bytes)
    assert store.capture(7, {"work": work}).seq == 7
    assert "empty" in store.manifest(7).dirs["work"] and store.seqs() == [1, 4, 5, 7]


def test_a_new_ctime_is_seen_even_with_size_and_mtime_forged_back(tmp_path: Path) -> None:
    """R-CKPT-1, the stated limit: a change that keeps size, mtime_ns, inode and ctime_ns is not seen. That
    cannot be built here: os.utime, which forges the mtime back, itself sets ctime to now, and ctime cannot
    be set from user space. So the nearest case is tested: same size, same mtime, same inode, new ctime
    -> the file is read again and its new content captured."""
    work = tmp_path / "work"
    work.mkdir()
    path = work / "answer.txt"
    path.write_text("42\n")
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    before = path.stat()

    with open(path, "r+b") as f:  # same inode, same size
        f.write(b"43\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert after.st_ctime_ns != before.st_ctime_ns

    manifest = store.capture(2, {"work": work})
    assert store.last_capture_stats is not None and store.last_capture_stats.files_read == 1
    assert manifest.roots["work"]["answer.txt"].digest == hashlib.sha256(b"43\n").hexdigest()


def test_files_changed_in_the_capture_clock_tick_are_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-CKPT-1: a file whose ctime is not older than the capture's filesystem clock could change again within
    that clock tick without a visible stat change (racy git), so the next capture does not trust its stat."""
    work = tmp_path / "work"
    write_tree(work, 5)
    store = CheckpointStore(tmp_path / "store")
    with monkeypatch.context() as patch:
        patch.setattr(CheckpointStore, "_clock", lambda self: 0)  # every file is as new as the clock
        store.capture(1, {"work": work})
    store.capture(2, {"work": work})
    assert store.last_capture_stats is not None and store.last_capture_stats.files_read == 5
    store.capture(3, {"work": work})
    assert store.last_capture_stats.files_read == 0 and store.last_capture_stats.files_reused == 5


def test_restore_brings_back_content_mode_and_mtime_and_removes_unlisted_files(tmp_path: Path) -> None:
    """R-CKPT-2: restore writes content, permission bits (0o640 and 0o600 told apart) and mtime_ns from the
    manifest, brings back empty directories, removes managed files and directories the checkpoint does not
    list, and keeps the root's path and mode."""
    work = tmp_path / "work"
    (work / "pkg" / "empty").mkdir(parents=True)
    shared, private = work / "pkg" / "shared.cfg", work / "private.cfg"
    shared.write_text("shared\n")
    private.write_text("private\n")
    shared.chmod(0o640)
    private.chmod(0o600)
    os.utime(shared, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    work.chmod(0o750)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    expected = snapshot(work)

    shared.write_text("edited by the agent\n")
    shared.chmod(0o666)
    private.unlink()
    (work / "pkg" / "empty").rmdir()
    (work / "new_dir").mkdir()
    (work / "new_dir" / "notes.md").write_text("not in the checkpoint\n")
    (work / "pkg" / "later.py").write_text("not in the checkpoint\n")

    store.restore(1, {"work": work})

    restored = snapshot(work)
    assert set(restored) == set(expected)
    for rel, (mode, mtime_ns, _, content) in expected.items():
        assert restored[rel][0] == mode, rel
        assert restored[rel][3] == content, rel
        if rel not in (".", "pkg", "pkg/empty"):  # directory mtimes are not kept
            assert restored[rel][1] == mtime_ns, rel
    assert (shared.stat().st_mode & 0o777, private.stat().st_mode & 0o777) == (0o640, 0o600)
    assert shared.stat().st_mtime_ns == 1_600_000_000_123_456_789
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "work"], "no staging directory is left"

    fresh = tmp_path / "fresh" / "work"
    store.restore(1, {"work": fresh})
    assert {rel: info[3] for rel, info in snapshot(fresh).items()} == {rel: info[3] for rel, info in expected.items()}


def test_restore_then_capture_reads_nothing_unchanged(tmp_path: Path) -> None:
    """R-CKPT-1, R-CKPT-2: restore records the stat of the files it wrote, so a capture right after a resume
    into a fresh directory reads only what changed since."""
    work = tmp_path / "work"
    files = write_tree(work, 50)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    resumed = CheckpointStore(tmp_path / "store")
    fresh = tmp_path / "fresh"
    resumed.restore(1, {"work": fresh})
    (fresh / files[0].relative_to(work)).write_text("after the resume\n")
    resumed.capture(2, {"work": fresh})
    assert resumed.last_capture_stats is not None
    # The edited file, plus any the restore wrote within the clock's last tick (racy, so read again).
    assert resumed.last_capture_stats.files_read >= 1 and resumed.last_capture_stats.files_reused >= 40


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_missing_or_corrupt_blob_fails_restore_and_leaves_the_roots_alone(tmp_path: Path, damage: str) -> None:
    """R-CKPT-2: a missing blob, or one that does not decompress to its digest, raises CheckpointError naming
    the file and the digest, and every root is byte-for-byte as it was (the other root too)."""
    work, home = tmp_path / "work", tmp_path / "home"
    write_tree(work, 20)
    home.mkdir()
    (home / "session.jsonl").write_text('{"turn": 1}\n')
    store = CheckpointStore(tmp_path / "store")
    manifest = store.capture(1, {"home": home, "work": work})
    (work / "d3" / "f0003.txt").write_text("the agent's later edit\n")
    (work / "extra.txt").write_text("later\n")
    (home / "session.jsonl").write_text('{"turn": 1}\n{"turn": 2}\n')
    before_work, before_home = snapshot(work), snapshot(home)

    digest = manifest.roots["work"]["d3/f0003.txt"].digest
    blob = store.root / "blobs" / digest[:2] / digest[2:]
    if damage == "missing":
        blob.unlink()
    else:
        blob.write_bytes(zlib.compress(b"something else\n"))

    with pytest.raises(CheckpointError) as failure:
        store.restore(1, {"home": home, "work": work})
    assert digest in str(failure.value) and "work/d3/f0003.txt" in str(failure.value)
    assert snapshot(work) == before_work and snapshot(home) == before_home
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "store", "work"]


def test_symlinks_and_special_files_are_not_followed(tmp_path: Path) -> None:
    """R-CKPT-2: a symlink to a file or a directory outside the root is neither captured nor followed (its
    target is never read); a FIFO is skipped without blocking."""
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text("outside content\n")
    (outside / "dir" / "deep.txt").write_text("outside deep content\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "real.txt").write_text("inside\n")
    (work / "to_file").symlink_to(outside / "secret.txt")
    (work / "to_dir").symlink_to(outside / "dir")
    os.mkfifo(work / "pipe")
    store = CheckpointStore(tmp_path / "store")

    manifest = store.capture(1, {"work": work})

    assert list(manifest.roots["work"]) == ["real.txt"] and manifest.skipped == 3
    assert store.last_capture_stats is not None and store.last_capture_stats.bytes_read == len("inside\n")
    assert all(b"outside" not in content for content in blobs(store).values())


def test_credential_paths_are_excluded(tmp_path: Path) -> None:
    """R-CKPT-2: credential paths are never read or stored, at any depth; look-alikes are kept."""
    home = tmp_path / "home"
    excluded = [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".netrc",
        ".git-credentials",
        ".docker/config.json",
        ".config/gcloud/application_default_credentials.json",
        "certs/server.pem",
        "tls.key",
        "project/.env",
        "project/.ssh/known_hosts",
        "backup/id_rsa.pub",
    ]
    kept = [
        ".docker/daemon.json",
        ".config/other/settings.json",
        "project/.env.example",
        "keys.txt",
        "project/environment.yml",
        ".sshrc",
    ]
    for rel in excluded + kept:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"<{rel}>")
    store = CheckpointStore(tmp_path / "store")

    manifest = store.capture(1, {"home": home})

    assert sorted(manifest.roots["home"]) == sorted(kept)
    assert manifest.excluded == len(excluded)  # an excluded directory counts once and is not entered
    stored = b"".join(blobs(store).values())
    assert all(f"<{rel}>".encode() not in stored for rel in excluded)


def test_restore_keeps_unmanaged_entries(tmp_path: Path) -> None:
    """R-CKPT-2: restore removes managed files only; credentials the new environment provisioned and
    symlinks stay, unless a checkpoint path takes their place."""
    home = tmp_path / "home"
    (home / "sessions").mkdir(parents=True)
    (home / "sessions" / "s1.jsonl").write_text("turn 1\n")
    (home / "notes").write_text("a file in the checkpoint\n")
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"home": home})

    fresh = tmp_path / "fresh_home"
    (fresh / ".ssh").mkdir(parents=True)
    (fresh / ".ssh").chmod(0o700)
    (fresh / ".ssh" / "id_ed25519").write_text("provisioned key\n")
    (fresh / ".netrc").write_text("machine example.com password provisioned\n")
    (fresh / "tool").symlink_to("/usr/bin/env")
    (fresh / "notes").symlink_to("/etc/hostname")  # collides with a checkpoint file
    (fresh / "stale.txt").write_text("a managed file not in the checkpoint\n")

    store.restore(1, {"home": fresh})

    assert (fresh / ".ssh" / "id_ed25519").read_text() == "provisioned key\n"
    assert (fresh / ".ssh").stat().st_mode & 0o777 == 0o700
    assert (fresh / ".netrc").read_text().endswith("provisioned\n")
    assert os.readlink(fresh / "tool") == "/usr/bin/env"
    assert not (fresh / "notes").is_symlink() and (fresh / "notes").read_text() == "a file in the checkpoint\n"
    assert not (fresh / "stale.txt").exists()
    assert (fresh / "sessions" / "s1.jsonl").read_text() == "turn 1\n"


def test_home_text_is_redacted_and_workdir_text_kept(tmp_path: Path) -> None:
    """R-CKPT-2: a secret-looking string in a text file of the home root is stored (and so restored)
    redacted; the same string in the working dir is stored verbatim."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    line = f"OPENAI_API_KEY={SECRET}\n"
    (work / "config.txt").write_text(line)
    (home / "config.txt").write_text(line)
    (home / "blob.bin").write_bytes(b"\xff\xfe" + SECRET.encode())  # not UTF-8: stored as is
    store = CheckpointStore(tmp_path / "store")

    manifest = store.capture(1, {"work": work, "home": home})

    redacted = f"OPENAI_API_KEY={REDACTED}\n".encode()
    contents = blobs(store)
    assert contents[manifest.roots["work"]["config.txt"].digest] == line.encode()
    assert contents[manifest.roots["home"]["config.txt"].digest] == redacted
    assert manifest.roots["home"]["config.txt"].size == len(redacted)
    assert manifest.redacted_roots == ["home"]
    (home / "config.txt").unlink()
    store.restore(1, {"home": home})
    assert (home / "config.txt").read_bytes() == redacted


def test_blobs_are_compressed(tmp_path: Path) -> None:
    """R-CKPT-1: a 1 MB file of repeated text takes a small fraction of its size in the store."""
    work = tmp_path / "work"
    work.mkdir()
    content = b"the quick brown fox jumps over the lazy dog\n" * 24_000
    (work / "log.txt").write_bytes(content)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    assert len(content) > 1_000_000
    assert store.stored_bytes() < 50_000
    assert list(blobs(store).values()) == [content]


def test_a_store_inside_a_root_and_unknown_roots_are_refused(tmp_path: Path) -> None:
    """R-CKPT-2: a store inside a managed root would capture itself and be wiped by a restore."""
    work = tmp_path / "work"
    work.mkdir()
    inner = CheckpointStore(work / ".checkpoints")
    with pytest.raises(CheckpointError, match="overlap"):
        inner.capture(1, {"work": work})
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    with pytest.raises(CheckpointError, match="no root named home"):
        store.restore(1, {"home": tmp_path / "home"})


def test_restore_without_renameat2_swaps_by_renames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R-CKPT-2: where renameat2 is missing, restore falls back to renames and gets the same result."""
    monkeypatch.setattr(file_tree, "_renameat2", None)
    work = tmp_path / "work"
    write_tree(work, 5)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work})
    expected = {rel: info[3] for rel, info in snapshot(work).items()}
    (work / "d0" / "f0000.txt").write_text("changed\n")
    (work / "stray.txt").write_text("stray\n")
    store.restore(1, {"work": work})
    assert {rel: info[3] for rel, info in snapshot(work).items()} == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "work"]


def test_a_failed_swap_puts_every_root_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R-CKPT-2: when the second root cannot be swapped in, the first, already swapped, is swapped back: the
    roots are as they were, down to their inodes."""
    work, home = tmp_path / "work", tmp_path / "home"
    write_tree(work, 5)
    write_tree(home, 5)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"work": work, "home": home})
    (work / "d1" / "f0001.txt").write_text("later\n")
    (home / "d2" / "f0002.txt").write_text("later\n")
    before_work, before_home = snapshot(work), snapshot(home)
    real_swap, calls = file_tree.swap, []

    def swap_failing_second(a: Path, b: Path) -> None:
        calls.append(b)
        if len(calls) == 2:
            raise OSError("no space left for the swap")
        real_swap(a, b)

    monkeypatch.setattr(file_tree, "swap", swap_failing_second)
    with pytest.raises(OSError, match="no space left"):
        store.restore(1, {"work": work, "home": home})
    assert calls == [work, home, work]
    assert snapshot(work) == before_work and snapshot(home) == before_home
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "store", "work"]
