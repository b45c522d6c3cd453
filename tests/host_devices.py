"""Run a script in a fresh Python process with several forced CPU devices (notes.md: the device count is fixed
before JAX starts), and read the JSON object it prints on its last line starting with "JSON"."""

import json
import os
import subprocess
import sys


def run_with_host_devices(script: str, devices: int, *args: str, timeout: float = 600, **env_extra: str) -> dict:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu",
               **env_extra)
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith("JSON")][-1][4:])
