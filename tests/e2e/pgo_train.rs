//! The training run of the profile-guided build (`host/src/bench/pgo.py train`), against the
//! real `serve` and `mock-upstream` of this build: its mix must get the answer each request
//! must get (a profile taken from a gateway that answered wrongly would optimise the error
//! paths), and a run whose answers are wrong must fail rather than hand on its counts.

use std::path::Path;
use std::process::Output;

use polygateway_tests::repo_root;
use tokio::process::Command;

async fn train(bin: &Path, calls: &str) -> Output {
    Command::new("python3")
        .arg(repo_root().join("host/src/bench/pgo.py"))
        .args(["train"])
        .arg(bin)
        .args(["--calls", calls, "--clients", "4"])
        .output()
        .await
        .expect("run pgo.py")
}

#[tokio::test]
async fn the_training_mix_gets_the_answer_each_request_must_get() {
    let out = train(Path::new(env!("CARGO_BIN_EXE_polygateway")), "600").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The mix is seeded per client, so the same requests go out on every run.
    let (head, mix) = stdout
        .trim_end()
        .split_once(" with 4 clients: ")
        .expect("the summary line");
    assert!(head.starts_with("pgo.py train: 600 calls in "), "{head}");
    assert_eq!(
        mix,
        "chat 244, chat-stream 147, responses 41, chat-tools 40, messages 35, embeddings 32, \
         chat-structured 19, models 13, unknown-model 11, no-messages 10, bad-json 8"
    );
}

#[tokio::test]
async fn a_training_run_with_wrong_answers_fails() {
    // The same build, its `serve` with the `llm` scope's first source pointed at a closed
    // port: the calls that land on it fail over to the second source or get no answer.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let dir = tempfile::tempdir().expect("tempdir");
    let wrapper = dir.path().join("polygateway");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = serve ] && export LLM__OPENAI__1__BASE_URL=http://127.0.0.1:{port}/v1 \
             LLM__OPENAI__2__BASE_URL=http://127.0.0.1:{port}/v1\nexec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_polygateway")
        ),
    )
    .expect("write the wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = train(&wrapper, "60").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("answers with the wrong status: ") && stderr.contains("(want 200)"),
        "{stderr}"
    );

    // A `serve` that never listens: the run fails naming it, and the mock upstream it had
    // started is stopped, not left behind.
    let no_serve = dir.path().join("no-serve");
    let mock_pid = dir.path().join("mock.pid");
    std::fs::write(
        &no_serve,
        format!(
            "#!/bin/sh\n[ \"$1\" = serve ] && exit 3\necho $$ > '{}'\nexec '{}' \"$@\"\n",
            mock_pid.display(),
            env!("CARGO_BIN_EXE_polygateway")
        ),
    )
    .expect("write the stand-in");
    std::fs::set_permissions(&no_serve, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = train(&no_serve, "10").await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "pgo.py: `{} serve` ended its output without a line, not `polygateway listening on \
             http://…`: is {0} a polygateway build?\n",
            no_serve.display()
        )
    );
    let pid = std::fs::read_to_string(&mock_pid).expect("the mock upstream started");
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the mock upstream (pid {}) outlived the run",
        pid.trim()
    );

    let out = train(&dir.path().join("missing"), "1").await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "pgo.py: {}: no such executable\n",
            dir.path().join("missing").display()
        )
    );
}
