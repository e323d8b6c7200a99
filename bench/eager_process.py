"""The eager side of a comparison in a process of its own: the child never imports latch, so
PyTorch runs in its default configuration (`import latch` sets OMP_WAIT_POLICY=PASSIVE for
its own process, and libgomp reads it once). The child is this same script run with the
arguments given; it first answers one JSON line {"wait_policy", "threads"}, then one line per
command. Used by check_torch_zoo.py and train_torch.py."""
import json
import os
import subprocess
import sys


class EagerProcess:
    def __init__(self, script, args, threads, wait_policy):
        """script: the path the child runs; args: its arguments; wait_policy: the
        OMP_WAIT_POLICY the user had before latch set one (None: unset)."""
        env = dict(os.environ)
        env.pop("OMP_WAIT_POLICY", None)
        if wait_policy is not None:
            env["OMP_WAIT_POLICY"] = wait_policy
        self.process = subprocess.Popen([sys.executable, script] + [str(a) for a in args],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        config = self.answer()
        if config != {"wait_policy": wait_policy or "unset", "threads": threads}:
            self.close()
            raise RuntimeError(f"the eager process runs with {config}")

    def answer(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the eager process ended (status {self.process.wait()})")
        return json.loads(line) if line[0] in "[{" else line.strip()

    def ask(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self):
        self.process.stdin.close()
        self.process.wait()
