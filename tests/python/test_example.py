"""etc/examples/pytorch/train.py on the library, without Slurm: 2 gloo ranks
on localhost. Uninterrupted vs stopped and resumed from a sealed checkpoint:
bitwise-equal parameters and losses; a corrupt shard falls back on both ranks.
(tests/integration/t0500 does the same under Slurm and the broker.)"""
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "etc", "examples", "pytorch", "train.py")
LIB = os.path.join(HERE, "..", "..", "python")


# The parameters after 40 steps on 2 ranks as the example computed them before
# it used the library (commit 04fd7c3; Debian 12's torch 1.13): unchanged.
BEFORE_THE_LIBRARY = "026a753c3fd16db4d4ac1d94c8633ac731f2da76052db71a222db8a697b1a581\n"


def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


class Example(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_ranks(self, run, steps, resume="", world=2, every="10"):
        ck = os.path.join(self.tmp, run)
        os.makedirs(ck, exist_ok=True)
        p = port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHARDNET_", "SLURM_"))}
        env.update(PYTHONPATH=LIB, MASTER_ADDR="127.0.0.1", MASTER_PORT=p, SHARDNET_WORLD_SIZE=str(world),
                   SHARDNET_CKPT_DIR=ck, SHARDNET_CKPT_EVERY=every, SHARDNET_RESUME_FROM=resume and os.path.join(ck, resume))
        procs = [subprocess.Popen(["/usr/bin/python3", TRAIN, "--steps", str(steps), "--step-seconds", "0"],
                                  env=dict(env, SHARDNET_RANK=str(r), SHARDNET_PROGRESS=os.path.join(self.tmp, f"{run}.p{r}")),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(world)]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        for r, (p, out) in enumerate(zip(procs, outs)):
            self.assertEqual(p.returncode, 0, f"rank {r} of {run}: {out}")
        return ck, "".join(outs)

    def final(self, ck):
        with open(ck + ".out/final.sha256") as f:
            return f.read()

    def losses(self, ck):
        last = {}
        with open(ck + ".out/losses-rank0.tsv") as f:
            for line in f:
                s, l = line.split()
                last[int(s)] = l
        return last

    def test_resume_bitwise_and_fallback(self):
        ref, _ = self.run_ranks("ref", 40)
        self.assertEqual(self.final(ref), BEFORE_THE_LIBRARY)
        ck, _ = self.run_ranks("fault", 35)  # stops after checkpoint-000030
        for n in ("checkpoint-000010", "checkpoint-000020", "checkpoint-000030"):
            open(os.path.join(ck, n, "SEALED"), "w").close()  # the agent's word for the broker's
        os.remove(ck + ".out/final.sha256")
        _, out = self.run_ranks("fault", 40, resume="checkpoint-000030")
        self.assertIn("resumed from checkpoint-000030 at step 30", out)
        self.assertEqual(self.final(ref), self.final(ck))
        self.assertEqual(self.losses(ref), self.losses(ck))
        self.assertEqual(len(self.losses(ref)), 40)
        # A flipped byte in rank 1's shard: both ranks resume from checkpoint-000020.
        shard = os.path.join(ck, "checkpoint-000030", "rank-1.pt")
        with open(shard, "r+b") as f:
            f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 0x20]))
        os.remove(ck + ".out/final.sha256")
        _, out = self.run_ranks("fault", 40, resume="checkpoint-000030")
        self.assertEqual(out.count("fell back to checkpoint-000020: checkpoint-000030 failed verification"), 2, out)
        self.assertEqual(out.count("resumed from checkpoint-000020 at step 20"), 2, out)
        self.assertEqual(self.final(ref), self.final(ck))


if __name__ == "__main__":
    unittest.main()
