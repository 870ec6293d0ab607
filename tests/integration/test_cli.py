"""The command line: `dais serve --help` and argument errors."""

import json
import re
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


def run_dais(dais_bin, *args, env=None, timeout=30):
    r = subprocess.run([str(dais_bin), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return r.returncode, r.stdout + r.stderr


def test_version_on_every_role(dais_bin):
    """Issue 35: `--version` on the binary and on each role, with the same answer."""
    answers = set()
    for role in ([], ["serve"], ["node"], ["gateway"], ["scheduler"], ["ctl"], ["memory"]):
        rc, out = run_dais(dais_bin, *role, "--version")
        assert rc == 0, f"dais {' '.join(role)} --version: exit {rc}\n{out}"
        answers.add(out.strip())
    assert len(answers) == 1 and answers.pop().startswith("dais 0."), answers


def test_misspelt_subcommands_and_flags_get_suggestions(dais_bin):
    rc, out = run_dais(dais_bin, "sevre")
    assert rc != 0 and "did you mean 'serve'?" in out, out
    rc, out = run_dais(dais_bin, "ctl", "gte", "nodes")
    assert rc != 0 and "'get'" in out and "did you mean" in out, out
    rc, out = run_dais(dais_bin, "serve", "--model-repository", "/nonexistent", "--http-prot", "1")
    assert rc != 0 and "did you mean --http-port?" in out, out
    # Nothing near: the error alone, no made-up suggestion.
    rc, out = run_dais(dais_bin, "zzzzzz")
    assert rc != 0 and "did you mean" not in out, out


def test_server_help_is_grouped_with_the_cluster_flags_first(dais_bin):
    rc, out = run_dais(dais_bin, "node", "--help")
    assert rc == 0, out
    lines = out.splitlines()
    etcd = next(i for i, line in enumerate(lines) if line.strip().startswith("--etcd "))
    assert etcd < 25, f"--etcd (required) is on line {etcd}:\n{out}"
    for group in ("Cluster:", "Models:", "TLS:", "Redis:", "Vector memory:", "gRPC:"):
        assert group in lines, f"no {group} section in `dais node --help`:\n{out}"
    # Every flag is still listed once.
    rc, serve = run_dais(dais_bin, "serve", "--help")
    for flag in SERVE_FLAGS:
        assert serve.count(flag + " ") + serve.count(flag + ",") >= 1, flag


def test_config_file_sets_flags_and_the_command_line_wins(dais_bin, tmp_path):
    cfg = tmp_path / "serve.toml"
    cfg.write_text("# dais serve flags\nio-busy-poll-microseconds = 100001\n")
    rc, out = run_dais(dais_bin, "serve", "--config", cfg, "--model-repository", "/nonexistent")
    assert rc != 0 and "--io-busy-poll-microseconds" in out, out  # read from the file
    rc, out = run_dais(dais_bin, "serve", "--config", cfg, "--model-repository", "/nonexistent",
                       "--io-busy-poll-microseconds", "0")
    assert "--io-busy-poll-microseconds" not in out and "/nonexistent" in out, out
    rc, out = run_dais(dais_bin, "serve", "--config", tmp_path / "missing.toml")
    assert rc != 0 and "missing.toml" in out, out
    cfg.write_text("no-such-flag = 3\n")
    rc, out = run_dais(dais_bin, "serve", "--config", cfg, "--model-repository", "/nonexistent")
    assert rc != 0 and "no-such-flag" in out, out


def test_tritonserver_flags_start_the_server_with_a_warning(start_server, model_repo, tmp_path):
    cfg = tmp_path / "serve.toml"
    cfg.write_text('model-control-mode = "explicit"\nload-model = "mlp_small"\n')
    srv = start_server(model_repo, "--config", cfg, "--exit-on-error=false", "--log-info",
                       "true", "--allow-metrics", "true", "--strict-model-config", "false",
                       "--log-format", "ISO8601")
    log = srv.log_text()
    assert "tritonserver flags dais does not implement were ignored" in log, log
    assert "--log-format" not in log, log  # implemented: tritonserver's ISO8601 is dais's text
    for flag in ("--exit-on-error", "--log-info", "--allow-metrics", "--strict-model-config"):
        assert flag in log, f"the warning does not name {flag}:\n{log}"
    # The config file's flags took effect: only the model it names was loaded.
    r = srv.post("/v2/repository/index", json={"ready": True})
    assert r.status_code == 200, r.text
    names = sorted(m["name"] for m in r.json())
    assert names == ["mlp_small"], names


def test_log_format_json_writes_one_object_per_line(start_server, model_repo, dais_bin):
    srv = start_server(model_repo, "--log-format", "json", "--model-control-mode", "explicit",
                       "--load-model", "mlp_small")
    # A failed load logs an error whose text comes from the request: quotes and all.
    r = srv.post('/v2/repository/models/no"such/load', json={})
    assert r.status_code >= 400, r.text
    lines = [l for l in srv.log_text().splitlines() if l.strip()]
    assert len(lines) >= 3, lines
    records = [json.loads(l) for l in lines]  # every line is one JSON object
    for rec in records:
        assert set(rec) >= {"time", "level", "source", "message"}, rec
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec["time"]), rec
        assert rec["level"] in ("info", "warning", "error"), rec
        assert re.fullmatch(r"[a-z0-9_]+\.(cc|h):\d+", rec["source"]), rec
    assert any("mlp_small" in rec["message"] for rec in records), records
    rc, out = run_dais(dais_bin, "serve", "--model-repository", str(model_repo), "--log-format",
                       "xml")
    assert rc != 0 and "--log-format" in out and "xml" in out, out


def test_etcd_from_the_environment_and_after_the_subcommand(dais_bin, etcd_server):
    import os
    env = dict(os.environ, DAIS_ETCD=etcd_server.endpoint)
    rc, out = run_dais(dais_bin, "ctl", "get", "nodes", env=env)
    assert rc == 0, out
    rc, out = run_dais(dais_bin, "ctl", "get", "nodes", "--etcd", etcd_server.endpoint)
    assert rc == 0, out
    # The flag wins over the environment.
    env["DAIS_ETCD"] = "127.0.0.1:1"
    rc, out = run_dais(dais_bin, "ctl", "get", "nodes", "--etcd", etcd_server.endpoint, env=env)
    assert rc == 0, out
    rc, out = run_dais(dais_bin, "ctl", "get", "nodes", env=env, timeout=60)
    assert rc != 0 and "127.0.0.1:1" in out, out


def test_bash_completion_offers_subcommands_flags_and_kinds(dais_bin, tmp_path):
    script = tmp_path / "dais.bash"
    rc, out = run_dais(dais_bin, "completion", "bash")
    assert rc == 0, out
    script.write_text(out)

    def complete(*words):
        line = " ".join(words)
        r = subprocess.run(["bash", "-c", f'source "{script}"; COMP_WORDS=({line}); '
                            f'COMP_CWORD={len(words) - 1}; _dais; echo "${{COMPREPLY[@]}}"'],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()
    assert complete("dais", "se") == ["serve"]
    assert complete("dais", "ctl", "g") == ["get"]
    assert complete("dais", "ctl", "get", "dep") == ["deployments"]
    assert complete("dais", "serve", "--http-p") == ["--http-port"]
    assert "--etcd" in complete("dais", "ctl", "--etcd", "127.0.0.1:2379", "rollout", "status",
                                "--")


def test_train_and_txn_keep_their_own_config_files(dais_bin, tmp_path):
    """`--config` of dais train (training.yaml) and dais txn (the transactions file) is theirs,
    not a file of flags: the loop demo's training job failed when it was read as one."""
    cfg = tmp_path / "training.yaml"
    cfg.write_text("model: fraud\n")
    rc, out = run_dais(dais_bin, "train", "--config", cfg)
    assert rc != 0 and "repository" in out and "not expected" not in out, out
    rc, out = run_dais(dais_bin, "txn", "serve", "--config", tmp_path / "missing.yaml")
    assert rc != 0 and "not expected" not in out, out
    # A flag file after a role's subcommand is refused, not ignored.
    flags = tmp_path / "ctl.toml"
    flags.write_text('etcd = "127.0.0.1:1"\n')
    rc, out = run_dais(dais_bin, "ctl", "get", "nodes", "--config", flags)
    assert rc == 2 and "--config goes before the subcommand" in out, out
