"""The command line: `dais serve --help` and argument errors."""

import subprocess

SERVE_FLAGS = ("--model-repository", "--http-port", "--grpc-port", "--metrics-port",
               "--model-control-mode", "--repository-poll-secs", "--load-model",
               "--strict-readiness", "--exit-timeout-secs", "--log-verbose")


def test_serve_help_lists_every_flag(dais_bin):
    r = subprocess.run([str(dais_bin), "serve", "--help"], capture_output=True, text=True,
                       timeout=30)
    text = r.stdout + r.stderr
    assert r.returncode == 0, f"exit {r.returncode}:\n{text}"
    missing = [f for f in SERVE_FLAGS if f not in text]
    assert not missing, f"`dais serve --help` does not mention {missing}:\n{text}"


def test_unknown_flag_is_rejected(dais_bin):
    r = subprocess.run([str(dais_bin), "serve", "--model-repository", "/nonexistent",
                        "--no-such-flag-xyz", "1"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0, f"accepted an unknown flag:\n{r.stdout}{r.stderr}"
    assert "no-such-flag-xyz" in (r.stdout + r.stderr)


def test_busy_poll_out_of_range_is_rejected(dais_bin):
    r = subprocess.run([str(dais_bin), "serve", "--model-repository", "/nonexistent",
                        "--io-busy-poll-microseconds", "100001"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0, f"accepted 100001:\n{r.stdout}{r.stderr}"
    assert "--io-busy-poll-microseconds" in r.stderr + r.stdout


def test_missing_example_repository_names_the_script(dais_bin, tmp_path):
    """Issue 31: the README's first command on a clean checkout, before the examples exist."""
    repo = tmp_path / "examples" / "model_repository"
    r = subprocess.run([str(dais_bin), "serve", "--model-repository", str(repo), "--http-port",
                        "0", "--grpc-port", "0"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no such directory" in r.stderr + r.stdout and "scripts/gen_examples.sh" in \
        r.stderr + r.stdout, r.stdout + r.stderr
    r = subprocess.run([str(dais_bin), "serve", "--model-repository", str(tmp_path / "nope"),
                        "--http-port", "0", "--grpc-port", "0"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "nope: no such directory" in r.stderr + r.stdout
