//! Rules about the repository's own text, checked without building or running a gateway:
//! every Rust source file opens with a `//!` header saying what it owns; comments cite only
//! documents that are in the repository, and every `docs/<page>.md#<anchor>` link resolves
//! to a page and a heading; and `host/src/` keeps the layering `ARCHITECTURE.md` declares
//! (section "Layering"), with the direction rules written as data below.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (this test belongs to the `host/` package).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ sits in the repository root")
        .to_path_buf()
}

/// `path` relative to the root, with `/` separators, for messages.
fn rel(path: &Path) -> String {
    let r = path.strip_prefix(root()).unwrap_or(path);
    r.to_string_lossy().replace('\\', "/")
}

/// Files under `entry` (a folder or a file, relative to the root) whose name ends with one
/// of `exts`, skipping build output (`target`), installed npm packages (`node_modules`:
/// other projects' files, not ours) and hidden folders (`.git`, `.venv`, …).
fn files(entry: &str, exts: &[&str]) -> Vec<PathBuf> {
    let start = root().join(entry);
    if start.is_file() {
        return vec![start];
    }
    let mut out = Vec::new();
    let mut stack = vec![start];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && name != "node_modules" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if exts.iter().any(|x| name.ends_with(x)) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Where the Rust and WIT sources live.
const SOURCE_ROOTS: &[&str] = &["host", "plugins", "tests", "wit", "examples", "fuzz"];

fn source_files(exts: &[&str]) -> Vec<PathBuf> {
    SOURCE_ROOTS.iter().flat_map(|r| files(r, exts)).collect()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", rel(path)))
}

// ---------------------------------------------------------------------------------------
// Lexing: comments apart from code.

/// One source file split in two: its code, with every comment and string or char literal
/// blanked (newlines kept, so line numbers still match), and its comment lines.
struct Lexed {
    code: String,
    /// `(line number, text)` of each comment, one entry per line of a block comment.
    comments: Vec<(usize, String)>,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Split Rust (or WIT) source into code and comments. Understands line and nested block
/// comments, strings with escapes, raw strings (`r#"…"#`) and char literals versus lifetimes.
fn lex(src: &str) -> Lexed {
    let s: Vec<char> = src.chars().collect();
    let mut code = String::with_capacity(src.len());
    let mut comments = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Blank one char of code: keep newlines so line numbers survive.
    let blank = |code: &mut String, c: char, line: &mut usize| {
        if c == '\n' {
            *line += 1;
            code.push('\n');
        } else {
            code.push(' ');
        }
    };
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            let start = i + 2;
            let mut end = start;
            while end < s.len() && s[end] != '\n' {
                end += 1;
            }
            comments.push((line, s[start..end].iter().collect()));
            for _ in i..end {
                code.push(' ');
            }
            i = end;
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            let mut text = String::new();
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    code.push_str("  ");
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    code.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if s[i] == '\n' {
                        comments.push((line, std::mem::take(&mut text)));
                    } else {
                        text.push(s[i]);
                    }
                    blank(&mut code, s[i], &mut line);
                    i += 1;
                }
            }
            comments.push((line, text));
        } else if c == '"' || (c == 'r' && raw_string_start(&s, i)) {
            // A raw string: r, then n hashes, then a quote; it ends at a quote and n hashes.
            let hashes = if c == 'r' {
                let mut n = 0;
                while s.get(i + 1 + n) == Some(&'#') {
                    n += 1;
                }
                code.push('r');
                for _ in 0..n {
                    code.push('#');
                }
                i += 1 + n;
                Some(n)
            } else {
                None
            };
            code.push('"');
            i += 1;
            while i < s.len() {
                match (s[i], hashes) {
                    ('\\', None) => {
                        code.push(' ');
                        if let Some(&e) = s.get(i + 1) {
                            blank(&mut code, e, &mut line);
                        }
                        i += 2;
                    }
                    ('"', None) => {
                        code.push('"');
                        i += 1;
                        break;
                    }
                    ('"', Some(n)) if (1..=n).all(|k| s.get(i + k) == Some(&'#')) => {
                        code.push('"');
                        i += 1 + n;
                        break;
                    }
                    (ch, _) => {
                        blank(&mut code, ch, &mut line);
                        i += 1;
                    }
                }
            }
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only the former closes.
            let close = if next == Some('\\') {
                (i + 3..s.len().min(i + 13)).find(|&k| s[k] == '\'')
            } else if s.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    for &ch in &s[i..=end] {
                        blank(&mut code, ch, &mut line);
                    }
                    i = end + 1;
                }
                None => {
                    code.push(c);
                    i += 1;
                }
            }
        } else {
            if c == '\n' {
                line += 1;
            }
            code.push(c);
            i += 1;
        }
    }
    Lexed { code, comments }
}

/// Whether `s[i] == 'r'` starts a raw string (`r"`, `r#"`, `br"`), not an identifier.
fn raw_string_start(s: &[char], i: usize) -> bool {
    let prev_ok =
        i == 0 || !is_ident(s[i - 1]) || (s[i - 1] == 'b' && (i < 2 || !is_ident(s[i - 2])));
    let mut k = i + 1;
    while s.get(k) == Some(&'#') {
        k += 1;
    }
    prev_ok && s.get(k) == Some(&'"')
}

fn line_of(code: &str, offset: usize) -> usize {
    code[..offset].matches('\n').count() + 1
}

// ---------------------------------------------------------------------------------------
// Item 1: the `//!` header.

/// Whether a Rust file opens (first non-blank line) with a `//!` comment.
fn has_header(src: &str) -> bool {
    src.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.trim_start().starts_with("//!"))
}

#[test]
fn every_rust_file_opens_with_a_header_saying_what_it_owns() {
    let missing: Vec<String> = source_files(&[".rs"])
        .into_iter()
        .filter(|p| !has_header(&read(p)))
        .map(|p| rel(&p))
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not open with a `//!` line saying what they own:\n  {}",
        missing.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------
// Item 2: citations and links.

/// Word-bounded occurrences of `word` in `text`.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The words of `text` (runs of identifier characters, `.` allowed inside).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(is_ident(c) || c == '.'))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
}

/// Why `text` (a comment, or prose) cites a document that is not in the repository, if it
/// does: a section sign of anything but a public standard, the design documents by name,
/// their decision ids ("D" and a number), milestone ids ("M", a number, a dot, a number) or
/// issue numbers of the trackers behind them.
fn outside_citation(text: &str) -> Option<&'static str> {
    for (i, _) in text.match_indices('§') {
        let before: String = text[..i].chars().rev().take(40).collect();
        let before: String = before.chars().rev().collect();
        if !(before.contains("RFC ") || before.contains("WHATWG")) {
            return Some("a section (§) of a document that is not in the repository");
        }
    }
    if has_word(text, "DESIGN") {
        return Some("the design document (DESIGN), which is not in the repository");
    }
    for needle in [
        "design-call-deadline",
        "plan-est-tokens",
        "research-wiki",
        "reference ARCHITECTURE",
        "reference design",
        "reference plan",
        "reference issue",
    ] {
        if text.contains(needle) {
            return Some("a design document that is not in the repository");
        }
    }
    let lower = text.to_lowercase();
    for (i, _) in lower.match_indices("issue") {
        if lower[..i].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &lower[i + "issue".len()..];
        let rest = rest.strip_prefix('s').unwrap_or(rest);
        let rest = rest
            .strip_prefix(' ')
            .or_else(|| rest.strip_prefix('-'))
            .unwrap_or(rest);
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            return Some("an issue number (the tracker is not in the repository)");
        }
    }
    for w in words(text) {
        let digits =
            |t: &str| !t.is_empty() && t.len() <= 2 && t.bytes().all(|b| b.is_ascii_digit());
        if let Some(n) = w.strip_prefix('D')
            && digits(n)
        {
            return Some("a decision id (D1–D15) of a document that is not in the repository");
        }
        if let Some(v) = w.strip_prefix('M')
            && let Some((a, b)) = v.split_once('.')
            && digits(a)
            && digits(b)
        {
            return Some("a milestone id of a document that is not in the repository");
        }
    }
    None
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code fences).
fn anchors(md: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for l in md.lines() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && l.starts_with('#') {
            out.insert(slug(l.trim_start_matches('#')));
        }
    }
    out
}

/// Why a link to `page` (a path relative to the root) with optional `anchor` is broken.
fn broken_link(page: &Path, anchor: Option<&str>) -> Option<String> {
    let Ok(md) = fs::read_to_string(page) else {
        return Some(format!("{} does not exist", rel(page)));
    };
    match anchor {
        Some(a) if !anchors(&md).contains(a) => Some(format!(
            "{} has no heading whose anchor is `#{a}`",
            rel(page)
        )),
        _ => None,
    }
}

/// Every `docs/<page>.md` or `docs/<page>.md#<anchor>` mentioned in `text`, with why it is
/// broken, if it is.
fn broken_docs_mentions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("docs/") {
        if text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| is_ident(c) || c == '/' || c == '.')
        {
            continue;
        }
        let rest = &text[i + "docs/".len()..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let name = rest[..name_len].trim_end_matches('.');
        if !name.ends_with(".md") {
            continue;
        }
        let after = &rest[name.len()..];
        let anchor = after.strip_prefix('#').map(|a| {
            let n = a
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(a.len());
            &a[..n]
        });
        if let Some(why) = broken_link(&root().join("docs").join(name), anchor) {
            out.push(why);
        }
    }
    out
}

/// Every relative Markdown link `](target)` in `md` (a file at `path`) that is broken. With
/// `only_docs`, only links that lead into `docs/` are checked.
fn broken_markdown_links(path: &Path, md: &str, only_docs: bool) -> Vec<String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for (i, _) in md.match_indices("](") {
        let rest = &md[i + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = rest[..end].trim();
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target, None),
        };
        let page = if file.is_empty() {
            path.to_path_buf()
        } else {
            dir.join(file)
        };
        let into_docs = rel(&page).starts_with("docs/");
        if only_docs && !into_docs {
            continue;
        }
        if !(file.is_empty() || file.ends_with(".md")) {
            if !only_docs && !page.exists() {
                out.push(format!("{} does not exist", rel(&page)));
            }
            continue;
        }
        if let Some(why) = broken_link(&page, anchor) {
            out.push(why);
        }
    }
    out
}

/// The Markdown files of the repository (prose: checked whole, not only comments).
fn markdown_files() -> Vec<PathBuf> {
    let mut out = files("README.md", &[".md"]);
    out.extend(files("ARCHITECTURE.md", &[".md"]));
    out.extend(files("docs", &[".md"]));
    out.extend(SOURCE_ROOTS.iter().flat_map(|r| files(r, &[".md"])));
    out
}

#[test]
fn comments_cite_only_documents_in_the_repository() {
    let mut problems = Vec::new();
    for path in source_files(&[".rs", ".wit"]) {
        for (line, text) in lex(&read(&path)).comments {
            if let Some(why) = outside_citation(&text) {
                problems.push(format!(
                    "{}:{line}: cites {why}: {}",
                    rel(&path),
                    text.trim()
                ));
            }
            for why in broken_docs_mentions(&text) {
                problems.push(format!("{}:{line}: broken link: {why}", rel(&path)));
            }
        }
    }
    for path in markdown_files() {
        let md = read(&path);
        for (n, text) in md.lines().enumerate() {
            if let Some(why) = outside_citation(text) {
                problems.push(format!(
                    "{}:{}: cites {why}: {}",
                    rel(&path),
                    n + 1,
                    text.trim()
                ));
            }
        }
        let in_docs = rel(&path).starts_with("docs/");
        for why in broken_markdown_links(&path, &md, !in_docs) {
            problems.push(format!("{}: broken link: {why}", rel(&path)));
        }
        if !in_docs {
            for why in broken_docs_mentions(&md) {
                problems.push(format!("{}: broken link: {why}", rel(&path)));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} comment(s) cite documents that are not in the repository or link to a missing \
         page or heading; state the rule in docs/ and link to it, or give the reason inline:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn the_docs_index_lists_every_page() {
    let index = read(&root().join("docs/README.md"));
    let missing: Vec<String> = files("docs", &[".md"])
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| n != "README.md" && !index.contains(&format!("]({n}")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/README.md does not link to: {missing:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Item 3: layering of host/src/.

/// One direction rule: code in any of `modules` (top-level folders or root files of
/// `host/src/`) may not name anything in `may_not_import`, through `crate::…` or a `super::`
/// path that climbs out of its own module.
struct Rule {
    modules: &'static [&'static str],
    may_not_import: &'static [&'static str],
    why: &'static str,
}

/// The direction rules of `ARCHITECTURE.md`, "Layering".
const LAYERING: &[Rule] = &[
    Rule {
        modules: &[
            "bench",
            "cache",
            "config",
            "error",
            "governance",
            "ledger",
            "mock",
            "pipeline",
            "plugin",
            "proxy",
            "telemetry",
            "transport",
        ],
        may_not_import: &["proxy", "cli"],
        why: "proxy/ is the HTTP edge over the library and cli.rs the binary's shell: the \
              library never depends on them, so the proxy and the embedded API share one path",
    },
    Rule {
        modules: &[
            "cache",
            "config",
            "error",
            "governance",
            "ledger",
            "mock",
            "plugin",
            "telemetry",
            "transport",
        ],
        may_not_import: &["pipeline"],
        why: "pipeline/ composes the subsystems into a call; they never call back up into it",
    },
    Rule {
        modules: &[
            "cache",
            "config",
            "error",
            "governance",
            "pipeline",
            "plugin",
            "proxy",
            "telemetry",
            "transport",
        ],
        may_not_import: &["bench", "mock"],
        why: "bench/ and mock/ are tools the CLI runs (a benchmark, a stand-in upstream); the \
              gateway's own code never depends on them",
    },
    Rule {
        modules: &[
            "cache",
            "config",
            "governance",
            "mock",
            "plugin",
            "telemetry",
            "transport",
        ],
        may_not_import: &["error"],
        why: "each subsystem fails with its own typed error (ConfigError, PluginError, \
              UpstreamError, BreakerError, LimiterError, CacheError); only the pipeline turns \
              them into the call's GatewayError",
    },
    Rule {
        modules: &["transport"],
        may_not_import: &["plugin", "governance", "cache", "telemetry"],
        why: "transport knows nothing about providers or policy: bytes in, framed events out",
    },
    Rule {
        modules: &["cache"],
        may_not_import: &["plugin", "transport", "telemetry"],
        why: "the cache is independent of the call pipeline: it keys, stores and guards; \
              pipeline/cache_layer/ decides what is read, replayed and stored",
    },
    Rule {
        modules: &["governance"],
        may_not_import: &["transport", "cache", "telemetry"],
        why: "governance is the policy state and its algorithms; it does no upstream I/O, \
              caching or recording (the retry loop drives it)",
    },
    Rule {
        modules: &["telemetry"],
        may_not_import: &["plugin", "governance", "transport"],
        why: "telemetry stores the rows it is handed (built in pipeline/rows.rs) and knows \
              nothing about components or policy",
    },
    Rule {
        modules: &["ledger"],
        may_not_import: &["plugin", "governance", "transport", "cache", "telemetry"],
        why: "the ledger reader only reads the llm_calls table the telemetry writer owns; it \
              shares no code with the call path, so a dashboard query cannot slow a call",
    },
    Rule {
        modules: &["plugin"],
        may_not_import: &["governance", "cache", "telemetry"],
        why: "the plugin runtime runs components; the host's policy, cache and ledger sit \
              above it",
    },
    Rule {
        modules: &["mock"],
        may_not_import: &[
            "bench",
            "cache",
            "config",
            "governance",
            "pipeline",
            "plugin",
            "telemetry",
            "transport",
        ],
        why: "the mock stands in for an upstream: sharing the gateway's parsing or encoding \
              would let a test pass for the wrong reason",
    },
];

/// A use of code that only some modules may use (by what it is called in the source).
struct ApiRule {
    name: &'static str,
    needles: &'static [&'static str],
    /// Path prefixes (relative to `host/src/`) where it is allowed.
    only_in: &'static [&'static str],
    why: &'static str,
}

const API_RULES: &[ApiRule] = &[
    ApiRule {
        name: "environment",
        needles: &[
            "env::var(",
            "env::vars(",
            "env::var_os(",
            "env::vars_os(",
            "dotenvy::",
        ],
        only_in: &["config/"],
        why: "only config/ reads the process environment and `.env`; everything else gets \
              `Settings`, so an embedding application needs no environment at all",
    },
    ApiRule {
        name: "http client",
        needles: &[
            "reqwest::Client::new",
            "reqwest::Client::builder",
            "ClientBuilder::new",
            "HttpConnector::new",
            "client::conn::http1",
        ],
        only_in: &["transport/"],
        why: "only transport/ talks to upstreams (pooled clients, one place for timeouts, \
              proxies and redaction)",
    },
    ApiRule {
        name: "listener",
        needles: &["TcpListener::bind", "UnixListener::bind"],
        only_in: &["proxy/", "mock/"],
        why: "the only listeners are the proxy and the mock upstream",
    },
    ApiRule {
        name: "wall clock or randomness",
        needles: &[
            "SystemTime::now",
            "rand::random",
            "rand::rng",
            "thread_rng",
            "Uuid::now_v7",
            "Uuid::new_v4",
        ],
        only_in: &["governance/clock.rs", "governance/entropy.rs"],
        why: "the wall clock comes through the injected clock and every random draw (back-off \
              jitter, call and attempt ids) through the one seeded source, so tests drive time \
              and ids sort in the order they were made",
    },
    ApiRule {
        name: "wasmtime",
        needles: &["wasmtime::", "wasmtime_wasi"],
        only_in: &["plugin/"],
        why: "plugin/ is the wasmtime runtime: every guest call goes through its pool",
    },
];

/// A use the rules above would refuse, kept on purpose: `file` (relative to `host/src/`) may
/// use the API rule `api`, for the reason given.
struct Exception {
    file: &'static str,
    api: &'static str,
    why: &'static str,
}

const EXCEPTIONS: &[Exception] = &[
    Exception {
        file: "governance/contract_tests.rs",
        api: "wall clock or randomness",
        why: "a unique Redis key prefix per test run, so parallel runs never share keys",
    },
    Exception {
        file: "bench/process.rs",
        api: "environment",
        why: "forwards PATH, HOME, runtime-tuning and OTEL_* variables to the gateway \
              processes the benchmark spawns; it configures nothing from them",
    },
    Exception {
        file: "keys/secret.rs",
        api: "wall clock or randomness",
        why: "a key's secret and id come from the OS CSPRNG: a token drawn from the seeded, \
              reproducible source could be predicted",
    },
    Exception {
        file: "bench/load.rs",
        api: "http client",
        why: "the benchmark's load generator is a client of the gateway, not an upstream call",
    },
    Exception {
        file: "bench/paced.rs",
        api: "http client",
        why: "the benchmark's paced-stream load generator is a client of the gateway and of \
              nginx, not an upstream call",
    },
    Exception {
        file: "bench/nginx.rs",
        api: "listener",
        why: "binds a free loopback port and releases it for the nginx the benchmark starts \
              (the floor); nothing is served on it by this process",
    },
    Exception {
        file: "bench/upstream.rs",
        api: "listener",
        why: "the benchmark's own fast upstream, so the figures do not measure the mock",
    },
    Exception {
        file: "transport/h1/tests.rs",
        api: "listener",
        why: "the HTTP/1.1 client's tests run raw TCP and TLS upstreams of their own, to see \
              the exact bytes sent and to close connections at chosen moments",
    },
    Exception {
        file: "mock/tests.rs",
        api: "http client",
        why: "the mock's unit tests are its HTTP client",
    },
    Exception {
        file: "mock/tests_vendors.rs",
        api: "http client",
        why: "the mock's unit tests of its Anthropic and Gemini endpoints are their HTTP client",
    },
];

/// The top-level modules of `host/src/`.
fn top_modules() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Ok(entries) = fs::read_dir(root().join("host/src")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                out.insert(name);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                out.insert(stem.to_string());
            }
        }
    }
    out
}

/// The module path of a file (relative to `host/src/`): `pipeline/embed/batch.rs` →
/// `[pipeline, embed, batch]`, `pipeline/mod.rs` → `[pipeline]`, `lib.rs` → `[]`.
fn module_path(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The first identifiers of a path after `crate::` or after the climbing `super::`s, at
/// `code[at..]`: `pipeline::X` → `[pipeline]`, `{config::A, governance::B}` → both.
fn path_heads(code: &str, at: usize) -> Vec<(usize, String)> {
    path_segments(code, at)
        .into_iter()
        .filter_map(|(at, segs)| segs.into_iter().next().map(|head| (at, head)))
        .collect()
}

/// A path at a `crate::` or `super::` prefix found by [`scan_paths`].
enum PathStart {
    /// `crate::…`; `at` is just past the prefix.
    Crate { at: usize },
    /// `super::super::…`: `supers` of them, inside `inline` inline modules of the file; `at`
    /// is just past the last one.
    Super {
        at: usize,
        supers: usize,
        inline: usize,
    },
}

/// Call `visit` for every `crate::` and `super::` path in `code` (lexed), in order. Inline
/// `mod name { … }` blocks are counted, so a caller can tell a `super` that stays in the file
/// from one that climbs out of it.
fn scan_paths(code: &str, mut visit: impl FnMut(PathStart)) {
    let mut depth: usize = 0;
    // Brace depths at which inline modules opened.
    let mut inline: Vec<usize> = Vec::new();
    let mut pending_mod = false;
    let mut i = 0;
    while let Some(c) = code[i..].chars().next() {
        let boundary = !code[..i]
            .chars()
            .next_back()
            .is_some_and(|p| is_ident(p) || p == ':');
        if c == '{' {
            depth += 1;
            if pending_mod {
                inline.push(depth);
                pending_mod = false;
            }
            i += 1;
        } else if c == '}' {
            if inline.last() == Some(&depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
            i += 1;
        } else if c == ';' {
            pending_mod = false;
            i += 1;
        } else if boundary && code[i..].starts_with("mod ") {
            pending_mod = true;
            i += 4;
        } else if boundary && code[i..].starts_with("crate::") {
            i += "crate::".len();
            visit(PathStart::Crate { at: i });
        } else if boundary && code[i..].starts_with("super::") {
            let mut supers = 0;
            while code[i..].starts_with("super::") {
                supers += 1;
                i += "super::".len();
            }
            visit(PathStart::Super {
                at: i,
                supers,
                inline: inline.len(),
            });
        } else {
            i += c.len_utf8();
        }
    }
}

/// Every top-level module that `code` (the lexed code of `file`, relative to `host/src/`)
/// names outside its own, with the line: `crate::x…` and `super::` chains that climb to the
/// crate root.
fn imports(file: &str, code: &str, modules: &BTreeSet<String>) -> Vec<(usize, String)> {
    let own = module_path(file);
    let mut out = Vec::new();
    scan_paths(code, |p| match p {
        PathStart::Crate { at } => out.extend(path_heads(code, at)),
        PathStart::Super { at, supers, inline } if supers >= own.len() + inline => {
            out.extend(path_heads(code, at));
        }
        PathStart::Super { .. } => {}
    });
    let top = own.first().cloned().unwrap_or_default();
    out.into_iter()
        .filter(|(_, m)| modules.contains(m) && *m != top)
        .map(|(at, m)| (line_of(code, at), m))
        .collect()
}

/// Every violation of [`LAYERING`] and [`API_RULES`] in `code` (the lexed code of `file`,
/// relative to `host/src/`), as `file:line: …`.
fn layering_violations(file: &str, code: &str, modules: &BTreeSet<String>) -> Vec<String> {
    let top = module_path(file).first().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for (line, target) in imports(file, code, modules) {
        for rule in LAYERING {
            if rule.modules.contains(&top.as_str())
                && rule.may_not_import.contains(&target.as_str())
            {
                out.push(format!(
                    "host/src/{file}:{line}: {top} may not import {target}: {}",
                    rule.why
                ));
            }
        }
    }
    for rule in API_RULES {
        if rule.only_in.iter().any(|p| file.starts_with(p))
            || EXCEPTIONS
                .iter()
                .any(|e| e.file == file && e.api == rule.name)
        {
            continue;
        }
        for needle in rule.needles {
            for (at, _) in code.match_indices(needle) {
                out.push(format!(
                    "host/src/{file}:{}: {} (`{needle}`) outside {}: {}",
                    line_of(code, at),
                    rule.name,
                    rule.only_in.join(", "),
                    rule.why
                ));
            }
        }
    }
    out
}

#[test]
fn host_modules_import_only_in_the_directions_architecture_md_declares() {
    let modules = top_modules();
    for rule in LAYERING {
        for m in rule.modules.iter().chain(rule.may_not_import) {
            assert!(
                modules.contains(*m),
                "the layering names `{m}`, not a module of host/src"
            );
        }
    }
    for e in EXCEPTIONS {
        assert!(
            root().join("host/src").join(e.file).is_file(),
            "exception for missing file {}",
            e.file
        );
        assert!(!e.why.is_empty());
    }
    let src = root().join("host/src");
    let mut problems = Vec::new();
    for path in files("host/src", &[".rs"]) {
        let file = path
            .strip_prefix(&src)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        let code = lex(&read(&path)).code;
        problems.extend(layering_violations(&file, &code, &modules));
    }
    assert!(
        problems.is_empty(),
        "imports against the layering of ARCHITECTURE.md (section \"Layering\"):\n  {}",
        problems.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------
// No import circle among pipeline/ files (re-exports of a `mod.rs` aside).

/// The paths named at `code[at..]` after a `crate::` or `super::` prefix, each with its
/// offset in `code` and as segments: `a::b::C` → `[a, b, C]`, `{a::B, c}` → `[a, B]` and
/// `[c]`; a nested group ends a path (`a::{B, C}` → `[a]`). Items that are not paths (`*`)
/// are left out.
fn path_segments(code: &str, at: usize) -> Vec<(usize, Vec<String>)> {
    let one = |s: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut t = s;
        loop {
            let n = t.find(|c: char| !is_ident(c)).unwrap_or(t.len());
            if n == 0 {
                break;
            }
            out.push(t[..n].to_string());
            match t[n..].strip_prefix("::") {
                Some(more) => t = more,
                None => break,
            }
        }
        out
    };
    let rest = &code[at..];
    let Some(group) = rest.strip_prefix('{') else {
        return vec![(at, one(rest))];
    };
    let mut out = Vec::new();
    let mut depth = 0;
    let mut item_start = true;
    for (k, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && !c.is_whitespace() => {
                item_start = false;
                let segs = one(&group[k..]);
                if !segs.is_empty() {
                    out.push((at + 1 + k, segs));
                }
            }
            _ => {}
        }
    }
    out
}

/// The pipeline files `code` (the lexed code of `file`, relative to `host/src/`) imports:
/// each `crate::pipeline::…` or climbing `super::…` path resolved to the longest module
/// prefix that is a file in `modules` (module path → file). Paths inside an inline module
/// that stay in the file, and the file itself, are not edges.
fn pipeline_imports(
    file: &str,
    code: &str,
    modules: &std::collections::BTreeMap<Vec<String>, String>,
) -> BTreeSet<String> {
    let own = module_path(file);
    let mut out = BTreeSet::new();
    let mut resolve = |base: &[String], at: usize| {
        for (_, segs) in path_segments(code, at) {
            for k in (0..=segs.len()).rev() {
                let mut m = base.to_vec();
                m.extend(segs[..k].iter().cloned());
                if let Some(f) = modules.get(&m) {
                    if f != file {
                        out.insert(f.clone());
                    }
                    break;
                }
            }
        }
    };
    scan_paths(code, |p| match p {
        PathStart::Crate { at } if code[at..].starts_with("pipeline::") => {
            resolve(&["pipeline".to_string()], at + "pipeline::".len());
        }
        PathStart::Super { at, supers, inline }
            if supers > inline && supers - inline <= own.len() =>
        {
            resolve(&own[..own.len() - (supers - inline)], at);
        }
        _ => {}
    });
    out
}

/// Every import circle among `files` (`(file, lexed code)`, paths relative to `host/src/`),
/// each as the files around it; edges into `pipeline/mod.rs` (the public re-exports) are
/// not counted.
fn pipeline_cycles(files: &[(String, String)]) -> Vec<Vec<String>> {
    let modules: std::collections::BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|(f, _)| (module_path(f), f.clone()))
        .collect();
    let edges: std::collections::BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|(f, code)| {
            let mut e = pipeline_imports(f, code, &modules);
            e.remove("pipeline/mod.rs");
            (f.clone(), e)
        })
        .collect();
    // Depth-first search; a back edge closes a circle.
    let mut cycles = Vec::new();
    let mut done: BTreeSet<String> = BTreeSet::new();
    fn visit(
        f: &str,
        edges: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        cycles: &mut Vec<Vec<String>>,
    ) {
        if let Some(at) = path.iter().position(|p| p == f) {
            cycles.push(path[at..].to_vec());
            return;
        }
        if done.contains(f) {
            return;
        }
        path.push(f.to_string());
        for g in edges.get(f).into_iter().flatten() {
            visit(g, edges, path, done, cycles);
        }
        path.pop();
        done.insert(f.to_string());
    }
    for (f, _) in files {
        visit(f, &edges, &mut Vec::new(), &mut done, &mut cycles);
    }
    cycles
}

#[test]
fn pipeline_files_import_each_other_without_a_circle() {
    let src = root().join("host/src");
    let files: Vec<(String, String)> = files("host/src/pipeline", &[".rs"])
        .into_iter()
        .map(|path| {
            let file = path
                .strip_prefix(&src)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            (file, lex(&read(&path)).code)
        })
        .collect();
    assert!(files.len() > 30, "found the pipeline files");
    let cycles = pipeline_cycles(&files);
    let shown: Vec<String> = cycles
        .iter()
        .map(|c| format!("{} → {}", c.join(" → "), c[0]))
        .collect();
    assert!(
        cycles.is_empty(),
        "import circles among pipeline/ files (ARCHITECTURE.md, \"Layering\": the runtime floor \
         at the bottom, the façade at the top, each layer importing only what is below it):\n  {}",
        shown.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------
// The checkers themselves, on examples: each rule fails when broken.

#[test]
fn the_checkers_catch_what_they_are_meant_to() {
    assert!(has_header("//! The thing.\nuse x;"));
    assert!(has_header("\n//! The thing."));
    assert!(!has_header("// Not a module header.\nuse x;"));
    assert!(!has_header("use x;\n//! late"));

    for cited in [
        "see reference §7.3",
        "(design-call-deadline §6.3 S5/S8)",
        "DESIGN §5",
        "DESIGN \"back off\"",
        "the issue-14 contract",
        "reference issue 12",
        "issue #22",
        "(D15)",
        "reference D7 `JsonRepairStrategy`",
        "M2.5 dual channel",
        "plan-est-tokens-decoupling",
    ] {
        assert!(outside_citation(cited).is_some(), "{cited}");
    }
    for fine in [
        "`Retry-After` (RFC 9110 §10.2.3)",
        "framing (WHATWG HTML §9.2.6)",
        "the reference splitmix64 sequence",
        "by design: lenient",
        "see docs/limiter.md#settlement",
        "D-Bus, M2 mac, Q1 sales, 3D",
    ] {
        assert_eq!(outside_citation(fine), None, "{fine}");
    }

    let lexed = lex("let s = \"// not a comment\"; // a comment\nlet c = '\"'; /* two\nlines */ x");
    let texts: Vec<&str> = lexed.comments.iter().map(|(_, t)| t.trim()).collect();
    assert_eq!(texts, ["a comment", "two", "lines"]);
    assert_eq!(lexed.comments[2].0, 3);
    assert!(!lexed.code.contains("not a comment"));
    assert!(
        lex("fn f<'a>(x: &'a str) -> &'a str { x }")
            .code
            .contains("'a str")
    );
    assert!(
        lex("let r = r#\"crate::pipeline \"quoted\"\"#; crate::x")
            .code
            .matches("crate::")
            .count()
            == 1
    );

    assert!(broken_docs_mentions("see docs/no-such-page.md#x").len() == 1);
    assert!(broken_docs_mentions("see docs/README.md#no-such-heading").len() == 1);
    assert_eq!(
        slug("Settlement on cancellation (S1–S8)"),
        "settlement-on-cancellation-s1s8"
    );

    let modules: BTreeSet<String> = ["cache", "pipeline", "config", "governance"]
        .into_iter()
        .map(String::from)
        .collect();
    let bad = lex("use crate::pipeline::ChatRequest;\nuse crate::{config::A, pipeline::B};\n");
    let v = layering_violations("cache/x.rs", &bad.code, &modules);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].starts_with("host/src/cache/x.rs:1: cache may not import pipeline"));
    assert!(v[1].starts_with("host/src/cache/x.rs:2: cache may not import pipeline"));
    // From cache/mod.rs, `super` is the crate root; inside its inline `mod tests` it is cache.
    let climbing = lex("use super::pipeline::X;\nmod tests {\n use super::pipeline::Y;\n}\n");
    assert_eq!(
        layering_violations("cache/mod.rs", &climbing.code, &modules).len(),
        1
    );
    let fine = lex("use crate::config::A;\nuse super::key::K;\n// crate::pipeline in a comment\n");
    assert!(layering_violations("cache/x.rs", &fine.code, &modules).is_empty());
    let env = lex("let p = std::env::var(\"PATH\");");
    assert_eq!(
        layering_violations("pipeline/x.rs", &env.code, &modules).len(),
        1
    );
    assert!(layering_violations("config/x.rs", &env.code, &modules).is_empty());

    let tree = |files: &[(&str, &str)]| -> Vec<(String, String)> {
        files
            .iter()
            .map(|(f, c)| (f.to_string(), lex(c).code))
            .collect()
    };
    let circle = tree(&[
        ("pipeline/mod.rs", "mod a; mod b; pub use a::X;"),
        ("pipeline/a.rs", "use super::b::Y;"),
        ("pipeline/b/mod.rs", "mod c;"),
        ("pipeline/b/c.rs", "use super::super::{a::X, mod_item};"),
    ]);
    assert!(
        pipeline_cycles(&circle).is_empty(),
        "b/mod.rs does not import a"
    );
    let circle = tree(&[
        ("pipeline/mod.rs", "mod a; mod b;"),
        ("pipeline/a.rs", "use super::b::c::Z;"),
        ("pipeline/b/mod.rs", "mod c;"),
        (
            "pipeline/b/c.rs",
            "fn f(x: crate::pipeline::a::X) -> usize { 0 }",
        ),
    ]);
    assert_eq!(
        pipeline_cycles(&circle),
        vec![vec![
            "pipeline/a.rs".to_string(),
            "pipeline/b/c.rs".to_string()
        ]]
    );
    let inside = tree(&[
        ("pipeline/mod.rs", "mod a;"),
        (
            "pipeline/a.rs",
            "mod tests { use super::*; use super::super::mod_item; }",
        ),
    ]);
    assert!(
        pipeline_cycles(&inside).is_empty(),
        "a test module's super is its file"
    );
}
