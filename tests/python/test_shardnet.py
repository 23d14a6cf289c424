"""Unit tests of python/shardnet (run by t-pylib.sh from `make check`)."""
import hashlib
import json
import os
import platform
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import numpy as np
import torch

import shardnet
from shardnet import atomic, checkpoint, manifest, progress_file as progress_mod, sealed

PY = "/usr/bin/python3"
LIB = os.path.dirname(os.path.dirname(os.path.abspath(shardnet.__file__)))
KEYS = ["SHARDNET_IMAGE_DIGEST", "SHARDNET_BROKER_URL", "SHARDNET_BROKER_TOKEN", "SHARDNET_REQUIRE_SEALED", "SHARDNET_RANK", "SHARDNET_WORLD_SIZE", "SHARDNET_CKPT_DIR", "SHARDNET_RESUME_FROM", "SHARDNET_CKPT_EVERY",
        "SHARDNET_PROGRESS", "SHARDNET_CKPT_POLICY", "SHARDNET_ATTEMPT", "SHARDNET_RUN", "RANK", "WORLD_SIZE"]
# What the agent accepts (spank/heartbeat.cpp commit_json: sscanf "%64s %llu %256s", 64 lowercase hex, no "..").
AGENT_MANIFEST_LINE = re.compile(r"[0-9a-f]{64} [0-9]+ [^\s]{1,256}")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def seal(ckpt_path):
    """What the agent does once the broker lists the checkpoint as sealed."""
    with open(os.path.join(ckpt_path, "SEALED"), "w") as f:
        f.write("sealed by the test\n")


def state():
    torch.manual_seed(1)
    m = torch.nn.Linear(8, 4)
    return {"model": m.state_dict(), "epoch": 3, "data_position": 41}


class Env(unittest.TestCase):
    """Each test in a temporary directory with its own SHARDNET_* environment."""

    def setUp(self):
        self.saved = {k: os.environ.pop(k) for k in KEYS if k in os.environ}
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.cwd = os.getcwd()
        os.chdir(self.dir)
        progress_mod._reset()
        shardnet.policy._reset()
        shardnet.prelimit.clear()
        checkpoint._pending.update(thread=None, error=None)

    def tearDown(self):
        if checkpoint._pending["thread"] is not None:
            checkpoint._pending["thread"].join()
        os.chdir(self.cwd)
        for k in KEYS:
            os.environ.pop(k, None)
        os.environ.update(self.saved)
        self.tmp.cleanup()

    def shardnet_env(self, **extra):
        os.environ.update(SHARDNET_RANK="0", SHARDNET_WORLD_SIZE="1", SHARDNET_CKPT_DIR=os.path.join(self.dir, "ck"),
                          SHARDNET_PROGRESS=os.path.join(self.dir, "progress"))
        os.environ.update(extra)
        os.makedirs(os.environ["SHARDNET_CKPT_DIR"], exist_ok=True)
        return os.environ["SHARDNET_CKPT_DIR"]


class Progress(Env):
    def test_no_broker_no_op(self):
        line = shardnet.progress(5)
        self.assertEqual(line, "5\n")
        self.assertEqual(os.listdir(self.dir), [], "progress without SHARDNET_PROGRESS must write nothing")

    def test_lines_the_agent_reads(self):
        self.shardnet_env()
        p = os.environ["SHARDNET_PROGRESS"]
        shardnet.progress(5)
        self.assertEqual(open(p).read(), "5\n")
        shardnet.progress(6, checkpointing=True)
        self.assertEqual(open(p).read(), "6 checkpointing\n")
        name = shardnet.save(6, state())
        self.assertEqual(shardnet.wait(), name)
        # The write's time from save() to the commit line: the broker's checkpoint policy uses it.
        line = open(p).read()
        m = re.fullmatch(rf"6 committed {name} took ([0-9]+\.[0-9]{{6}})\n", line)
        self.assertTrue(m, line)
        self.assertTrue(0 < float(m.group(1)) < 30, line)
        took = m.group(1)
        shardnet.progress(7)
        self.assertEqual(open(p).read(), f"7 committed {name} took {took}\n", "the last commit is repeated with each step")
        shardnet.progress(8, checkpointing=True)
        self.assertEqual(open(p).read(), f"8 checkpointing committed {name} took {took}\n")
        shardnet.progress(9)
        progress_mod.committed("checkpoint-x", 8)  # a background commit after step 9: the step stays 9
        self.assertEqual(open(p).read(), "9 committed checkpoint-x\n")
        self.assertEqual(sorted(os.listdir(self.dir)), ["ck", "progress", "progress.env"], "a temporary file was left behind")

    def test_environment_report_before_the_first_progress_line(self):
        self.shardnet_env(SHARDNET_IMAGE_DIGEST="sha256:" + "ab" * 32)
        p = os.environ["SHARDNET_PROGRESS"]
        shardnet.progress(1)
        env = json.loads(open(p + ".env").read())
        # The fields the broker takes (common/rank_environment.hpp), each a short printable string or null.
        self.assertEqual(sorted(env), ["cuda", "cudnn", "driver", "image_digest", "nccl", "python", "torch"])
        self.assertEqual(env["python"], platform.python_version())
        self.assertEqual(env["torch"], torch.__version__)
        self.assertEqual(env["cuda"], torch.version.cuda)
        self.assertEqual(env["image_digest"], "sha256:" + "ab" * 32)
        for k, v in env.items():
            self.assertTrue(v is None or (0 < len(v) <= 128 and v.isprintable() and v.isascii()), (k, v))
        # Once per process: a later step does not write it again.
        os.unlink(p + ".env")
        shardnet.progress(2)
        self.assertFalse(os.path.exists(p + ".env"))

    def test_environment_refuses_a_digest_that_is_not_one(self):
        self.shardnet_env(SHARDNET_IMAGE_DIGEST="sha256:abc\n; rm -rf /")
        shardnet.progress(1)
        env = json.loads(open(os.environ["SHARDNET_PROGRESS"] + ".env").read())
        self.assertIsNone(env["image_digest"])

    def test_no_environment_report_without_an_agent(self):
        shardnet.progress(1)
        self.assertEqual(os.listdir(self.dir), [])

    def test_lines_pinned_in_the_agents_unit_test(self):
        # tests/unit/test_heartbeat.cpp, "the Python library's progress line and manifest"
        self.assertEqual(progress_mod.format_progress(8, True, "checkpoint-00000010"),
                         "8 checkpointing committed checkpoint-00000010\n")
        self.assertEqual(progress_mod.format_progress(8, False, "checkpoint-00000010", 0.25),
                         "8 committed checkpoint-00000010 took 0.250000\n")
        sha = "245b8d90b348d3ea15a54379e63555b7d55c5c949a7488d3b5ea39358df2832a"
        self.assertEqual(manifest.format_manifest([manifest.Entry(sha, 14243, "rank-0.pt")]), f"{sha} 14243 rank-0.pt\n")

    def test_bad_step(self):
        for bad in (-1, "3", 2.5, True):
            with self.assertRaisesRegex(ValueError, "step must be a whole number"):
                shardnet.progress(bad)

    def test_atomic_for_a_reader(self):
        self.shardnet_env()
        p = os.environ["SHARDNET_PROGRESS"]
        shardnet.progress(0)
        seen, stop = [], threading.Event()

        def reader():
            while not stop.is_set():
                with open(p) as f:
                    seen.append(f.read())
        t = threading.Thread(target=reader)
        t.start()
        for step in range(1, 3000):
            shardnet.progress(step, checkpointing=step % 2 == 0)
        stop.set()
        t.join()
        bad = [s for s in seen if not re.fullmatch(r"[0-9]+( checkpointing)?\n", s)]
        self.assertGreater(len(seen), 10)
        self.assertEqual(bad[:3], [], "a reader saw a partial progress file")


class Policy(Env):
    def test_interval(self):
        os.environ["SHARDNET_CKPT_EVERY"] = "3"
        self.assertEqual([s for s in range(1, 10) if shardnet.should_checkpoint(s)], [3, 6, 9])
        os.environ["SHARDNET_CKPT_EVERY"] = "auto"
        self.assertEqual([s for s in range(1, 25) if shardnet.should_checkpoint(s)], [10, 20])
        del os.environ["SHARDNET_CKPT_EVERY"]
        self.assertEqual(shardnet.checkpoint_interval(), shardnet.DEFAULT_INTERVAL)
        for bad in ("0", "-2", "ten"):
            os.environ["SHARDNET_CKPT_EVERY"] = bad
            with self.assertRaisesRegex(ValueError, "SHARDNET_CKPT_EVERY"):
                shardnet.should_checkpoint(4)

    def test_auto_takes_the_brokers_policy_at_a_boundary(self):
        self.shardnet_env(SHARDNET_CKPT_EVERY="auto", SHARDNET_CKPT_POLICY=os.path.join(self.dir, "ckpt-policy"))
        policy_file = os.environ["SHARDNET_CKPT_POLICY"]
        self.assertEqual([s for s in range(1, 21) if shardnet.should_checkpoint(s)], [10, 20], "no policy yet: the default")
        with open(policy_file, "w") as f:  # what the agent writes (spank/heartbeat.cpp policy_file_text)
            f.write("every_steps=7 version=1 seconds=3.500\n")
        # Taken at the next boundary of the old interval (30), not before: every rank is there at once.
        self.assertEqual([s for s in range(21, 43) if shardnet.should_checkpoint(s)], [30, 35, 42])
        self.assertEqual((shardnet.checkpoint_interval(), shardnet.policy.policy_version()), (7, 1))
        for junk in ("", "every_steps=0 version=2", "every_steps=x version=3", "version=4", "\xff\xfe",
                     "every_steps=2147483648 version=5", "every_steps=5 version=4194304"):
            with open(policy_file, "w", encoding="latin-1") as f:
                f.write(junk)
            self.assertTrue(shardnet.should_checkpoint(49), junk)
            self.assertEqual(shardnet.checkpoint_interval(), 7, f"a policy file {junk!r} is ignored")
        with open(policy_file, "w") as f:
            f.write("every_steps=4 version=1 seconds=1\n")
        shardnet.should_checkpoint(56)
        self.assertEqual(shardnet.checkpoint_interval(), 7, "an old version never replaces a newer one")
        os.unlink(policy_file)
        os.environ["SHARDNET_CKPT_EVERY"] = "5"
        self.assertEqual(shardnet.checkpoint_interval(), 5, "a fixed interval is never the broker's")

    def test_prelimit_signal_until_save(self):
        self.shardnet_env(SHARDNET_CKPT_EVERY="1000")
        self.assertFalse(shardnet.should_checkpoint(7))
        os.kill(os.getpid(), signal.SIGUSR1)  # what prelimit=USR1@S sends; the default action would kill us
        for _ in range(100):
            if shardnet.emergency_pending():
                break
            time.sleep(0.01)
        self.assertTrue(shardnet.should_checkpoint(7))
        self.assertTrue(shardnet.should_checkpoint(7), "asking does not consume the emergency")
        name = shardnet.save(7, state())
        self.assertIsNone(checkpoint._pending["thread"], "an emergency save must be durable when save returns")
        self.assertTrue(os.path.isfile(os.path.join(os.environ["SHARDNET_CKPT_DIR"], name, "rank-0.manifest")))
        self.assertRegex(open(os.environ["SHARDNET_PROGRESS"]).read(), rf"^7 committed {name} took [0-9.]+\n$")
        self.assertFalse(shardnet.should_checkpoint(8), "the save was the emergency checkpoint")

    def test_keeps_the_programs_handler(self):
        code = textwrap.dedent("""
            import os, signal, time
            got = []
            signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
            import shardnet
            os.kill(os.getpid(), signal.SIGUSR1); time.sleep(0.1)
            print(len(got), shardnet.emergency_pending())
        """)
        out = subprocess.run([PY, "-c", code], env=dict(os.environ, PYTHONPATH=LIB), capture_output=True, text=True)
        self.assertEqual(out.stdout.split(), ["1", "False"], out.stderr)


    def test_watches_the_sites_signal(self):
        # prelimit=USR2@S: the plugin says SHARDNET_PRELIMIT_SIGNAL=12, and the
        # library, from import on, turns USR2 (not USR1) into the flag.
        code = textwrap.dedent("""
            import os, signal, time
            import shardnet
            os.kill(os.getpid(), signal.SIGUSR2); time.sleep(0.1)
            print(shardnet.emergency_pending(), signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL)
        """)
        env = dict(os.environ, PYTHONPATH=LIB, SHARDNET_PRELIMIT_SIGNAL=str(int(signal.SIGUSR2)))
        out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.stdout.split(), ["True", "True"], out.stderr)
        # A signal meant to end the program, or no signal at all: SIGUSR1.
        from shardnet import prelimit
        for v, want in (("15", signal.SIGUSR1), ("2", signal.SIGUSR1), ("x", signal.SIGUSR1), ("", signal.SIGUSR1),
                        ("999", signal.SIGUSR1), (str(int(signal.SIGUSR2)), signal.SIGUSR2)):
            self.assertEqual(prelimit.configured_signal({"SHARDNET_PRELIMIT_SIGNAL": v}), want, v)

class SaveLoad(Env):
    def test_manifest_as_the_agent_reads_it(self):
        ck = self.shardnet_env(SHARDNET_RANK="1", SHARDNET_WORLD_SIZE="2")
        name = shardnet.save(12, state())
        shardnet.wait()
        self.assertEqual(name, "checkpoint-00000012")
        d = os.path.join(ck, name)
        self.assertEqual(sorted(os.listdir(d)), ["rank-1.manifest", "rank-1.pt"])
        text = open(os.path.join(d, "rank-1.manifest")).read()
        self.assertTrue(text.endswith("\n") and text.count("\n") == 1, repr(text))
        self.assertRegex(text.rstrip("\n"), AGENT_MANIFEST_LINE)
        h, size, path = text.split()
        self.assertEqual((h, int(size), path), (sha256(os.path.join(d, "rank-1.pt")),
                                                 os.path.getsize(os.path.join(d, "rank-1.pt")), "rank-1.pt"))

    def test_parse_rejects_what_the_agent_rejects(self):
        good = "a" * 64 + " 10 rank-0.pt\n"
        self.assertEqual(manifest.parse_manifest(good)[0].bytes, 10)
        for bad in ["A" * 64 + " 10 rank-0.pt", "a" * 63 + " 10 rank-0.pt", "a" * 64 + " x rank-0.pt",
                    "a" * 64 + " 10 ../rank-0.pt", "a" * 64 + " 10", ""]:
            with self.assertRaises(shardnet.ManifestError, msg=repr(bad)):
                manifest.parse_manifest(bad)

    def test_round_trip_restores_rng(self):
        ck = self.shardnet_env()
        random.seed(5); np.random.seed(5); torch.manual_seed(5)
        name = shardnet.save(30, state())
        shardnet.wait()
        after = (random.random(), np.random.rand(), torch.rand(3))
        random.seed(9); np.random.seed(9); torch.manual_seed(9)
        os.environ["SHARDNET_RESUME_FROM"] = os.path.join(ck, name)
        c = shardnet.load()
        self.assertEqual((c.step, c.name, c.fell_back, c.state["data_position"]), (30, name, False, 41))
        self.assertTrue(torch.equal(c.state["model"]["weight"], state()["model"]["weight"]))
        again = (random.random(), np.random.rand(), torch.rand(3))
        self.assertEqual(after[:2], again[:2])
        self.assertTrue(torch.equal(after[2], again[2]))

    def test_resume_by_name(self):
        self.shardnet_env()
        name = shardnet.save(3, state(), durable=True)
        self.assertEqual(shardnet.load(name).step, 3)
        with self.assertRaisesRegex(shardnet.CheckpointError, "checkpoint-00000004/rank-0.manifest is missing"):
            shardnet.load("checkpoint-00000004")

    def test_fresh_start_without_resume(self):
        self.assertIsNone(shardnet.load())
        shardnet.save(1, state(), durable=True)  # no SHARDNET_*: into the working directory, still with a manifest
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "checkpoint-00000001"))), ["rank-0.manifest", "rank-0.pt"])

    def corrupt_and_load(self, damage):
        ck = self.shardnet_env()
        old = shardnet.save(10, state(), durable=True)
        seal(os.path.join(ck, old))
        s = state(); s["epoch"] = 4
        new = shardnet.save(20, s)
        shardnet.wait()
        damage(os.path.join(ck, new))
        c = shardnet.load(os.path.join(ck, new))
        self.assertEqual((c.step, c.name, c.state["epoch"]), (10, old, 3))
        self.assertEqual([n for n, _ in c.rejected], [new])
        return c.rejected[0][1]

    def test_flipped_byte_falls_back(self):
        def flip(d):
            p = os.path.join(d, "rank-0.pt")
            b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x01
            open(p, "wb").write(b)
        self.assertIn("sha256", self.corrupt_and_load(flip))

    def test_truncated_falls_back(self):
        self.assertIn("bytes, its manifest says", self.corrupt_and_load(lambda d: os.truncate(os.path.join(d, "rank-0.pt"), 100)))

    def test_missing_manifest_falls_back(self):
        self.assertIn("missing", self.corrupt_and_load(lambda d: os.unlink(os.path.join(d, "rank-0.manifest"))))

    def test_a_pickle_that_runs_code_is_refused_and_the_previous_sealed_one_taken(self):
        # The shard is swapped for a pickle that would run a command, and its
        # manifest rewritten to match: the hashes agree, the load refuses.
        marker = os.path.join(self.dir, "pwned")
        class Evil:
            def __reduce__(self):
                return (os.system, ("touch " + marker,))
        def swap(d):
            p = os.path.join(d, "rank-0.pt")
            torch.save({"shardnet": shardnet.checkpoint.FORMAT, "step": 20, "state": {"x": Evil()}, "rng": {}}, p)
            open(os.path.join(d, "rank-0.manifest"), "w").write(f"{sha256(p)} {os.path.getsize(p)} rank-0.pt\n")
        why = self.corrupt_and_load(swap)
        self.assertIn("rank-0.pt: refused: it holds more than tensors and plain values", why)
        self.assertIn("it names posix.system", why)
        self.assertFalse(os.path.exists(marker), "the pickle ran its code")
        # A checkpoint the user trusts, on their explicit word: it loads.
        ck = os.environ["SHARDNET_CKPT_DIR"]
        newest = sorted(n for n in os.listdir(ck) if n.startswith("checkpoint-"))[-1]
        shardnet.load(os.path.join(ck, newest), allow_pickle=True, restore_rng=False)
        self.assertTrue(os.path.exists(marker))

    def test_only_sealed_ones_are_fallbacks(self):
        ck = self.shardnet_env()
        sealed = shardnet.save(10, state(), durable=True); seal(os.path.join(ck, sealed))
        shardnet.save(15, state())  # committed but never sealed
        bad = shardnet.save(20, state())
        shardnet.wait()
        os.truncate(os.path.join(ck, bad, "rank-0.pt"), 10)
        self.assertEqual(shardnet.load(os.path.join(ck, bad)).name, sealed)
        os.unlink(os.path.join(ck, sealed, "SEALED"))
        with self.assertRaisesRegex(shardnet.CheckpointError, "no checkpoint verifies on every rank: checkpoint-00000020"):
            shardnet.load(os.path.join(ck, bad))


class Background(Env):
    def test_error_reaches_the_trainer(self):
        ck = self.shardnet_env()
        write_text = atomic.write_text
        def full(path, text, fsync=True):
            if path.endswith(".manifest"):
                raise OSError(28, "No space left on device", path)
            return write_text(path, text, fsync)
        atomic.write_text = full
        try:
            name = shardnet.save(10, state())
            with self.assertRaisesRegex(shardnet.CheckpointError, f"saving checkpoint {name} of rank 0 .*No space left on device"):
                shardnet.wait()
            self.assertEqual(shardnet.wait(), "", "an error is raised once")
            shardnet.save(20, state())
            checkpoint._pending["thread"].join()
            with self.assertRaisesRegex(shardnet.CheckpointError, "checkpoint-00000020"):
                shardnet.save(30, state())  # the next save raises the last one's error
        finally:
            atomic.write_text = write_text
        self.assertNotIn("committed", open(os.environ["SHARDNET_PROGRESS"]).read())
        self.assertEqual([n for n in os.listdir(os.path.join(ck, name)) if n != "rank-0.pt"], [],
                         "a failed save left files behind or a manifest")

    def test_state_is_serialised_before_save_returns(self):
        ck = self.shardnet_env()
        t = torch.zeros(1000)
        name = shardnet.save(5, {"t": t})
        t.add_(1)  # the trainer's next step
        shardnet.wait()
        c = shardnet.load(os.path.join(ck, name))
        self.assertEqual(float(c.state["t"].sum()), 0.0)


KILLED_SAVE = textwrap.dedent("""
    import os, sys, time, torch, shardnet
    from shardnet import atomic, manifest
    where = sys.argv[1]
    torch.manual_seed(1)
    state = {"model": torch.nn.Linear(512, 512).state_dict()}     # ~1 MB
    if where == "shard":   # stall part-way through the shard's bytes
        import io
        from shardnet import checkpoint
        def slow(payload, path):
            buf = io.BytesIO(); torch.save(payload, buf)
            with open(path, "wb") as f:
                f.write(buf.getvalue()[:4096]); f.flush()
                print("stalled", flush=True); time.sleep(60)
        checkpoint._serialise = slow
    else:                  # stall after the shard's rename, before the manifest
        write_text = atomic.write_text
        def slow(path, text, fsync=True):
            if path.endswith(".manifest"):
                print("stalled", flush=True); time.sleep(60)
            return write_text(path, text, fsync)
        atomic.write_text = slow
    shardnet.save(20, state)   # its second half stalls in the background
    shardnet.wait()
""")


class KilledSave(Env):
    def kill_mid_save(self, where, rewrite=False):
        ck = self.shardnet_env()
        old = shardnet.save(10, state(), durable=True)
        seal(os.path.join(ck, old))
        if rewrite:  # checkpoint-20 of an earlier attempt, written again
            shardnet.save(20, {"model": torch.nn.Linear(2, 2).state_dict()})
            shardnet.wait()
            progress_mod._reset()
        before = sha256(os.path.join(ck, old, "rank-0.pt"))
        p = subprocess.Popen([PY, "-c", KILLED_SAVE, where], env=dict(os.environ, PYTHONPATH=LIB),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline(), "stalled\n", p.stderr.read() if p.poll() is not None else "")
        p.send_signal(signal.SIGKILL)
        p.wait()
        new = os.path.join(ck, "checkpoint-00000020")
        self.assertTrue(os.path.isdir(new))
        self.assertNotIn("rank-0.manifest", os.listdir(new))
        self.assertEqual(sha256(os.path.join(ck, old, "rank-0.pt")), before, "the sealed checkpoint changed")
        self.assertIn(open(os.environ["SHARDNET_PROGRESS"]).read(), ("20 checkpointing\n", "20\n"),
                         "the agent must not be told of the killed checkpoint")
        c = shardnet.load(new)
        self.assertEqual((c.name, c.step), (old, 10))
        self.assertIn("rank-0.manifest is missing", c.rejected[0][1])
        return os.listdir(new)

    def test_kill_while_writing_the_shard(self):
        left = self.kill_mid_save("shard")
        self.assertNotIn("rank-0.pt", left, "the shard got its final name before it was complete")
        self.assertTrue(any(n.startswith("rank-0.pt.tmp.") for n in left), left)

    def test_the_next_save_removes_what_a_killed_one_left(self):
        left = self.kill_mid_save("shard")
        tmp = [n for n in left if n.startswith("rank-0.pt.tmp.")]
        self.assertTrue(tmp, left)
        # Another rank's temporary file beside it is not this rank's to remove.
        new = os.path.join(os.environ["SHARDNET_CKPT_DIR"], "checkpoint-00000020")
        open(os.path.join(new, "rank-1.pt.tmp.99999"), "w").close()
        shardnet.save(20, state(), durable=True)
        after = sorted(os.listdir(new))
        self.assertEqual(after, ["rank-0.manifest", "rank-0.pt", "rank-1.pt.tmp.99999"])

    def test_kill_before_the_manifest(self):
        self.assertIn("rank-0.pt", self.kill_mid_save("manifest"))

    def test_kill_while_rewriting(self):
        # The old manifest goes first: never beside the new shard, where the agent would commit it.
        self.assertIn("rank-0.pt", self.kill_mid_save("manifest", rewrite=True))


# Two ranks over gloo. Neither calls destroy_process_group(): Debian 13's
# torch 2.6 hangs in it at times (2 runs of 10 on a 2-core machine, the rank
# whose peer had already gone), and teardown is not what these tests test.
TWO_RANKS_INIT = textwrap.dedent("""
    import datetime, os, sys, torch, torch.distributed as dist, shardnet
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], timeout=datetime.timedelta(seconds=60),
                            rank=int(os.environ["SHARDNET_RANK"]), world_size=2)
""")

TWO_RANKS = TWO_RANKS_INIT + textwrap.dedent("""
    c = shardnet.load()
    print(c.name, c.state["rank"], ",".join(n for n, _ in c.rejected), flush=True)
""")


def run_two_ranks(code, env_of_rank):
    """Rank 0 and rank 1 of code, each with os.environ and env_of_rank(r):
    their (stdout, stderr). A rank still running after 120 s is killed and
    its output so far is in the failure."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = str(s.getsockname()[1])
    procs = [subprocess.Popen([PY, "-c", code, port], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=LIB, SHARDNET_RANK=str(r), GLOO_SOCKET_IFNAME="lo", **env_of_rank(r)))
             for r in (0, 1)]
    outs = []
    for r, p in enumerate(procs):
        try:
            outs.append(p.communicate(timeout=120))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            raise AssertionError(f"rank {r} still running after 120 s; its output: {out!r}, its errors: {err[-2000:]}")
    return outs


class TwoRanks(Env):
    def test_one_bad_shard_moves_every_rank(self):
        ck = self.shardnet_env(SHARDNET_WORLD_SIZE="2")
        for r in (0, 1):
            os.environ["SHARDNET_RANK"] = str(r)
            for step in (10, 20):
                shardnet.save(step, {"rank": r}, durable=True)
        for step in (10, 20):
            seal(os.path.join(ck, shardnet.checkpoint_name(step)))
        bad = os.path.join(ck, "checkpoint-00000020", "rank-1.pt")
        b = bytearray(open(bad, "rb").read()); b[-30] ^= 0xff; open(bad, "wb").write(b)
        outs = run_two_ranks(TWO_RANKS, lambda r: {"SHARDNET_RESUME_FROM": os.path.join(ck, "checkpoint-00000020")})
        for r, (out, err) in enumerate(outs):
            self.assertEqual(out.split(), ["checkpoint-00000010", str(r), "checkpoint-00000020"], f"rank {r}: {err}")


TWO_RANKS_POLICY = TWO_RANKS_INIT + textwrap.dedent("""
    due = [s for s in range(1, 40) if shardnet.should_checkpoint(s)]
    print(",".join(map(str, due)), shardnet.checkpoint_interval(), shardnet.policy.policy_version(), flush=True)
""")


class TwoRanksPolicy(Env):
    def test_ranks_agree_on_the_newest_policy(self):
        # Rank 1's agent got version 3 (every 6 steps), rank 0's only version 2 (every 4):
        # both take version 3 at the first boundary (10), so both checkpoint at the same steps.
        self.shardnet_env(SHARDNET_WORLD_SIZE="2", SHARDNET_CKPT_EVERY="auto")
        files = [os.path.join(self.dir, f"policy-{r}") for r in (0, 1)]
        for f, text in zip(files, ("every_steps=4 version=2 seconds=1\n", "every_steps=6 version=3 seconds=1\n")):
            with open(f, "w") as out:
                out.write(text)
        outs = run_two_ranks(TWO_RANKS_POLICY, lambda r: {"SHARDNET_CKPT_POLICY": files[r]})
        for r, (out, err) in enumerate(outs):
            self.assertEqual(out.split(), ["10,12,18,24,30,36", "6", "3"], f"rank {r}: {err}")


class SealedAnswers(unittest.TestCase):
    """What the broker answers 200 is its word: a garbled list, or one that
    names a file twice, is refused (CheckpointError), never skipped; only a
    broker that cannot be asked leaves the manifest's word (Unavailable)."""

    def serve(self, body):
        import http.server

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        srv = http.server.HTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.shutdown)
        return {"SHARDNET_BROKER_URL": f"http://127.0.0.1:{srv.server_port}", "SHARDNET_BROKER_TOKEN": "t"}

    def test_a_garbled_answer_is_refused(self):
        env = self.serve(b'{"files": [{"path": "rank-0.pt"')
        with self.assertRaisesRegex(shardnet.CheckpointError, "not a file list"):
            sealed.files("r", "checkpoint-1", 0, env)

    def test_a_file_listed_twice_is_refused(self):
        f = {"path": "rank-0.pt", "sha256": "a" * 64, "bytes": 1}
        g = dict(f, sha256="b" * 64)
        env = self.serve(json.dumps({"files": [f, g]}).encode())
        with self.assertRaisesRegex(shardnet.CheckpointError, "rank-0.pt listed twice"):
            sealed.files("r", "checkpoint-1", 0, env)

    def test_a_well_formed_answer_is_read(self):
        f = {"path": "rank-0.pt", "sha256": "a" * 64, "bytes": 1}
        env = self.serve(json.dumps({"files": [f]}).encode())
        self.assertEqual(sealed.files("r", "checkpoint-1", 0, env), {"rank-0.pt": ("a" * 64, 1)})

    def serve_pages(self, pages):
        """A broker that answers ?from=I with pages[I] (a dict), and counts the asks."""
        import http.server
        import urllib.parse
        asked = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                asked.append((q.get("rank"), q.get("from")))
                body = json.dumps(pages[int(q["from"][0])]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        srv = http.server.HTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.shutdown)
        return {"SHARDNET_BROKER_URL": f"http://127.0.0.1:{srv.server_port}", "SHARDNET_BROKER_TOKEN": "t"}, asked

    def tree(self, n):
        """n files of rank 0, each with its index and inclusion proof, and the list they make."""
        leaves = [sealed.leaf_hash(f"part-{i:03d}.pt", "%064x" % i, i) for i in range(n)]

        def mth(ls):
            if len(ls) == 1:
                return ls[0]
            k = 1
            while k * 2 < len(ls):
                k *= 2
            return sealed._node(mth(ls[:k]), mth(ls[k:]))

        def path(m, ls):
            if len(ls) == 1:
                return []
            k = 1
            while k * 2 < len(ls):
                k *= 2
            return path(m, ls[:k]) + [mth(ls[k:])] if m < k else path(m - k, ls[k:]) + [mth(ls[:k])]

        files = [{"path": f"part-{i:03d}.pt", "sha256": "%064x" % i, "bytes": i, "rank": 0, "index": i,
                  "inclusion": [h.hex() for h in path(i, leaves)]} for i in range(n)]
        return files, {"merkle_root": mth(leaves).hex(), "count": n, "bytes": sum(range(n))}

    def test_a_ranks_files_are_read_page_by_page(self):
        files, lst = self.tree(5)
        pages = {0: {"files": files[:2], "from": 0, "next_from": 2, "list": lst},
                 2: {"files": files[2:4], "from": 2, "next_from": 4, "list": lst},
                 4: {"files": files[4:], "from": 4, "next_from": None, "list": lst}}
        env, asked = self.serve_pages(pages)
        got = sealed.files("r", "checkpoint-1", 0, env)
        self.assertEqual(sorted(got), [f["path"] for f in files])
        self.assertEqual([a[1] for a in asked], [["0"], ["2"], ["4"]])
        self.assertTrue(all(a[0] == ["0"] for a in asked))

    def test_a_carried_seal_with_a_receipt_as_the_brokers_own_is_refused(self):
        files, lst = self.tree(2)
        page = {"files": files, "from": 0, "next_from": None, "list": lst, "carried": True, "sealed_by": "beta"}
        env, _ = self.serve_pages({0: dict(page, receipt={"seq": 3, "digest": "d" * 64})})
        with self.assertRaisesRegex(shardnet.CheckpointError, "carried from broker beta with a receipt as its own"):
            sealed.files("r", "checkpoint-1", 0, env)
        claim = {"broker": "beta", "seq": 3, "digest": "d" * 64, "checked": False}
        env, _ = self.serve_pages({0: dict(page, receipt=None, sender_receipt=claim)})
        self.assertEqual(sorted(sealed.files("r", "checkpoint-1", 0, env)), [f["path"] for f in files])

    def test_a_busy_broker_is_asked_again_after_retry_after(self):
        # A job's ranks share their token's few list requests in flight: a
        # 429 is waited out (Retry-After), never taken as the broker away.
        import http.server
        files, lst = self.tree(2)
        body = json.dumps({"files": files, "from": 0, "next_from": None, "list": lst}).encode()
        asked = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                asked.append(self.path)
                busy = len(asked) <= 2
                out = b'{"error": {"code": "too_many_list_requests", "message": "busy"}}' if busy else body
                self.send_response(429 if busy else 200)
                if busy:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        srv = http.server.HTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.shutdown)
        env = {"SHARDNET_BROKER_URL": f"http://127.0.0.1:{srv.server_port}", "SHARDNET_BROKER_TOKEN": "t"}
        self.assertEqual(sorted(sealed.files("r", "checkpoint-1", 0, env)), [f["path"] for f in files])
        self.assertEqual(len(asked), 3)

    def test_pages_of_another_list_or_out_of_step_are_refused(self):
        files, lst = self.tree(4)
        other = dict(lst, count=5)
        env, _ = self.serve_pages({0: {"files": files[:2], "from": 0, "next_from": 2, "list": lst},
                                   2: {"files": files[2:], "from": 2, "next_from": None, "list": other}})
        with self.assertRaisesRegex(shardnet.CheckpointError, "pages are of different lists"):
            sealed.files("r", "checkpoint-1", 0, env)
        env, _ = self.serve_pages({0: {"files": files[:2], "from": 0, "next_from": 3, "list": lst}})
        with self.assertRaisesRegex(shardnet.CheckpointError, "next_from 3 is not the entry after the page"):
            sealed.files("r", "checkpoint-1", 0, env)

if __name__ == "__main__":
    unittest.main()


def _token(key, run, attempt, world, uid, job, cluster, reader=False):
    """A derived token (common/worker_token.hpp), as slurmstepd makes it."""
    import hmac
    msg = (b"shardnet-reader-v2\0" if reader else b"shardnet-worker-v2\0") + run.encode() \
        + b"".join(b"\0" + str(n).encode() for n in (attempt, world, uid, job)) + b"\0" + cluster.encode()
    mac = hmac.new(key, msg, hashlib.sha256).hexdigest()
    return f"{'snr2' if reader else 'snw2'}.{attempt}.{world}.{uid}.{job}.{cluster}.{mac}.{run}"


class SealedListProofs(unittest.TestCase):
    """sealed.py's RFC 9162 inclusion check against a tree made by the
    RFC's definition (MTH), for every leaf of every size up to 20."""

    def mth(self, leaves):
        if len(leaves) == 1:
            return leaves[0]
        k = 1
        while k * 2 < len(leaves):
            k *= 2
        return sealed._node(self.mth(leaves[:k]), self.mth(leaves[k:]))

    def path(self, m, leaves):
        if len(leaves) == 1:
            return []
        k = 1
        while k * 2 < len(leaves):
            k *= 2
        if m < k:
            return self.path(m, leaves[:k]) + [self.mth(leaves[k:])]
        return self.path(m - k, leaves[k:]) + [self.mth(leaves[:k])]

    def test_every_leaf_of_every_size_and_tampering(self):
        for n in range(1, 21):
            leaves = [sealed.leaf_hash(f"rank-{i}.pt", "%064x" % i, i) for i in range(n)]
            root = self.mth(leaves)
            for m in range(n):
                p = self.path(m, leaves)
                self.assertTrue(sealed.verify_inclusion(m, n, leaves[m], p, root), (n, m))
                self.assertFalse(sealed.verify_inclusion(m, n, sealed.leaf_hash("x", "0" * 64, 1), p, root))
                self.assertFalse(sealed.verify_inclusion(m + 1, n, leaves[m], p, root))
                if p:
                    self.assertFalse(sealed.verify_inclusion(m, n, leaves[m], p[:-1], root))

    def test_the_leaf_is_the_manifest_line(self):
        self.assertEqual(sealed.leaf_hash("rank-0.pt", "ab" * 32, 18).hex(),
                         hashlib.sha256(b"\x00" + ("ab" * 32).encode() + b" 18 rank-0.pt").hexdigest())


class SealedByBroker(Env):
    """load() against a real broker (BROKER, as make check sets it): a shard
    swapped together with its manifest is refused because the broker sealed
    another digest."""

    def setUp(self):
        super().setUp()
        broker = os.environ.get("BROKER") or os.path.join(LIB, "..", "build", "broker", "shardnet-broker")
        self.assertTrue(os.access(broker, os.X_OK), f"no broker at {broker} (make check sets BROKER)")
        self.key = b"k" * 32
        kf = os.path.join(self.dir, "worker.key")
        with open(kf, "wb") as f:
            f.write(self.key)
        os.chmod(kf, 0o600)
        admin = hashlib.sha256(b"admin-t").hexdigest()
        with open(os.path.join(self.dir, "broker.json"), "w") as f:
            json.dump({"listen": "127.0.0.1:0", "plain_http": True, "database": os.path.join(self.dir, "b.db"),
                       "tokens": [{"name": "ops", "scope": "admin", "sha256": admin}],
                       "worker_keys": [{"name": "site", "key_file": kf}]}, f)
        self.broker_bin = broker
        self.restart_broker()
        claim = ("rs", 1, 1, os.getuid(), 5, "c1")
        self.agent = _token(self.key, *claim)
        self.reader = _token(self.key, *claim, reader=True)

    def restart_broker(self):
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        with open(os.path.join(self.dir, "broker.log"), "a") as log:
            self.broker = subprocess.Popen([self.broker_bin, "--config", os.path.join(self.dir, "broker.json"), "--port-file", port_file],
                                           stderr=log)
        port = ""
        for _ in range(200):
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = f.read().strip()
            if port:
                break
            time.sleep(0.05)
        self.assertTrue(port, "the broker wrote no port file")
        self.url = f"http://127.0.0.1:{port}"

    def tearDown(self):
        self.broker.kill()
        self.broker.wait()
        os.environ.pop("SHARDNET_BROKER_URL", None)
        os.environ.pop("SHARDNET_BROKER_TOKEN", None)
        os.environ.pop("SHARDNET_REQUIRE_SEALED", None)
        super().tearDown()

    def post(self, path, body, token):
        import urllib.error
        import urllib.request
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": "Bearer " + token})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def commit(self, ck, name):
        """What the agent sends for rank 0's manifest: the broker seals (world 1)."""
        with open(os.path.join(ck, name, "rank-0.manifest")) as f:
            text = f.read().split()
        files = [{"sha256": text[0], "bytes": int(text[1]), "path": text[2]}]
        self.assertEqual(self.post(f"/v1/runs/rs/checkpoints/{name}/commit", {"attempt": 1, "rank": 0, "world_size": 1, "files": files},
                                   self.agent), 200)
        seal(os.path.join(ck, name))

    def test_a_shard_and_manifest_swapped_together_are_refused_by_the_sealed_digest(self):
        ck = self.shardnet_env(SHARDNET_RUN="rs", SHARDNET_ATTEMPT="1")
        beat = {"run": "rs", "attempt": 1, "node": "n1", "interval": 5, "state": "running", "ranks": [{"rank": 0, "step": 1}]}
        self.assertEqual(self.post("/v1/heartbeats", beat, self.agent), 204)
        old = shardnet.save(10, state(), durable=True)
        self.commit(ck, old)
        s = state(); s["epoch"] = 4
        new = shardnet.save(20, s, durable=True)
        self.commit(ck, new)
        # Swapped by whoever can write the directory: a well-formed shard of
        # their own (no pickle tricks), its manifest rewritten to match.
        p = os.path.join(ck, new, "rank-0.pt")
        t = state(); t["epoch"] = 666
        torch.save({"shardnet": shardnet.checkpoint.FORMAT, "step": 20, "state": t, "rng": {}}, p)
        with open(os.path.join(ck, new, "rank-0.manifest"), "w") as f:
            f.write(f"{sha256(p)} {os.path.getsize(p)} rank-0.pt\n")
        # Without the broker's word the swap passes: the manifest agrees.
        self.assertEqual(shardnet.load(os.path.join(ck, new), restore_rng=False).state["epoch"], 666)
        os.environ.update(SHARDNET_BROKER_URL=self.url, SHARDNET_BROKER_TOKEN=self.reader)
        c = shardnet.load(os.path.join(ck, new), restore_rng=False)
        self.assertEqual((c.name, c.state["epoch"]), (old, 3))
        why = c.rejected[0][1]
        self.assertIn(p, why)
        self.assertIn(f"sha256 {sha256(p)}", why)
        self.assertRegex(why, r"the broker sealed sha256 [0-9a-f]{64} \(\d+ bytes\): refused")
        self.assertNotIn(f"the broker sealed sha256 {sha256(p)}", why)
        # The list the seal committed to (its Merkle root): a commit row
        # changed in the broker's store after the seal is refused, naming the file.
        self.broker.kill()
        self.broker.wait()
        import sqlite3
        db = sqlite3.connect(os.path.join(self.dir, "b.db"))
        forged_sha = sha256(p)
        db.execute("UPDATE commits SET files = ? WHERE run = 'rs' AND name = ?",
                   (json.dumps([{"path": "rank-0.pt", "sha256": forged_sha, "bytes": os.path.getsize(p)}]), new))
        db.commit()
        db.close()
        self.restart_broker()
        os.environ.update(SHARDNET_BROKER_URL=self.url)
        c = shardnet.load(os.path.join(ck, new), restore_rng=False)
        self.assertEqual(c.name, old)
        self.assertRegex(c.rejected[0][1], r"'rank-0.pt' \(sha256 %s\) is not in the file list its seal committed to \(Merkle root [0-9a-f]{64}, 1 files\)" % forged_sha)
        # The reader token reads; it cannot act for the job.
        self.assertEqual(self.post("/v1/heartbeats", beat, self.reader), 403)
        self.assertEqual(self.post(f"/v1/runs/rs/checkpoints/{new}/commit", {"attempt": 1, "rank": 0, "world_size": 1, "files": []},
                                   self.reader), 403)
        # A SEALED marker the broker never sealed is no seal.
        forged = shardnet.save(30, state(), durable=True)
        seal(os.path.join(ck, forged))
        with self.assertRaisesRegex(shardnet.CheckpointError, "the broker sealed no such files"):
            checkpoint._read_verified(os.path.join(ck, forged), 0, None, False, "rs")
        # The broker away: a warning, the manifest's word, and the load goes
        # on (weights only); SHARDNET_REQUIRE_SEALED=1 refuses instead.
        self.broker.kill()
        self.broker.wait()
        with self.assertLogs("shardnet", "WARNING") as logs:
            self.assertEqual(shardnet.load(os.path.join(ck, old), restore_rng=False).name, old)
        self.assertIn("the broker's sealed digests could not be had", "\n".join(logs.output))
        os.environ["SHARDNET_REQUIRE_SEALED"] = "1"
        with self.assertRaisesRegex(shardnet.CheckpointError, "SHARDNET_REQUIRE_SEALED=1 refuses"):
            shardnet.load(os.path.join(ck, old), restore_rng=False)
