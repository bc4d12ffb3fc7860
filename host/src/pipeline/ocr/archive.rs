//! The layout archive (MonkeyOCR `/parse` → `download_url` → ZIP → `*_middle.json`): resolve
//! the URL against the source's base URL, download it under the attempt's deadline with a
//! size cap, and unzip the one member the provider asked for with a cap on its decompressed
//! size (a zip bomb is `result_invalid`, not an out-of-memory). The credential goes only to
//! the base URL's own origin.

use std::io::Read;

use reqwest::header::HeaderMap;
use tokio::time::Instant;

use crate::plugin::AuthScheme;

use super::super::failure::AttemptFailure;
use super::super::runtime::{Inner, SourceRuntime};
use super::super::upstream::{fault, read_capped, result_invalid, sent, transient};

/// Largest archive downloaded (256 MiB); a larger one is `result_invalid`.
pub(crate) const ARCHIVE_CAP: usize = 256 * 1024 * 1024;
/// Largest decompressed member read from it (64 MiB); a larger one is `result_invalid`.
pub(crate) const MEMBER_CAP: u64 = 64 * 1024 * 1024;

/// The origin (`scheme://host[:port]`, default port omitted) of an absolute `http(s)` URL,
/// parsed by the same WHATWG rules as the HTTP client that will connect to it (so a URL
/// such as `http://evil\@host/` names the host the client really reaches); `None` otherwise.
fn origin(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return None;
    }
    Some(parsed.origin().ascii_serialization())
}

/// The absolute URL of a plugin's `download_url`: an `http(s)` URL as is, a path starting
/// with `/` appended to `base_url`; anything else is `None`.
pub(crate) fn resolve(base_url: &str, url: &str) -> Option<String> {
    if origin(url).is_some() {
        Some(url.to_string())
    } else if url.starts_with('/') && !url.starts_with("//") {
        Some(format!("{}{url}", base_url.trim_end_matches('/')))
    } else {
        None
    }
}

/// Whether `url` is on `base_url`'s origin (scheme, host and port).
pub(crate) fn same_origin(base_url: &str, url: &str) -> bool {
    matches!((origin(base_url), origin(url)), (Some(a), Some(b)) if a == b)
}

/// Download the archive at `url` (already resolved) before `deadline`; the credential per
/// `auth` only on the source's own origin. A non-2xx answer is classified like the upload's.
pub(crate) async fn download(
    inner: &Inner,
    source: &SourceRuntime,
    url: &str,
    auth: &AuthScheme,
    deadline: Instant,
) -> Result<Vec<u8>, AttemptFailure> {
    let f = "parse-layout-response";
    let mut headers = HeaderMap::new();
    if same_origin(&source.base_url, url) {
        match source.auth_header(auth) {
            Ok(Some((n, v))) => {
                headers.insert(n, v);
            }
            Ok(None) => {}
            Err(m) => return Err(fault(source, f, m)),
        }
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        transient(
            format!("the layout archive URL `{url}` is invalid: {e}"),
            "archive_download",
        )
    })?;
    let send = inner.http.send(
        source.settings.trust_env,
        "GET",
        &parsed,
        headers,
        Vec::new(),
    );
    let mut resp = sent(source, f, tokio::time::timeout_at(deadline, send).await)?;
    if !(200..300).contains(&resp.status) {
        // The archive link came from the service itself: a missing or failing download is
        // the service's problem (retry, maybe elsewhere), never a rejected client request.
        return Err(transient(
            format!(
                "downloading the layout archive failed: HTTP {}",
                resp.status
            ),
            "archive_download",
        ));
    }
    let declared = resp
        .headers
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > ARCHIVE_CAP as u64) {
        return Err(too_large(declared.unwrap_or_default()));
    }
    read_capped(source, &mut resp, ARCHIVE_CAP, deadline, too_large).await
}

fn too_large(bytes: u64) -> AttemptFailure {
    result_invalid(format!(
        "the layout archive has more than {ARCHIVE_CAP} bytes ({bytes} seen)"
    ))
}

/// Why an archive yields no member.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ArchiveError {
    #[error("the layout download is not a ZIP archive: {0}")]
    NotZip(String),
    #[error("the layout archive has no *{0} member")]
    NoMember(String),
    #[error("the layout archive's {name} exceeds {MEMBER_CAP} bytes decompressed")]
    MemberTooLarge { name: String },
    #[error("cannot read {name} from the layout archive: {message}")]
    Corrupt { name: String, message: String },
}

/// The first file of `archive` whose name ends with `suffix`: its name and bytes, at most
/// [`MEMBER_CAP`] of them decompressed.
pub(crate) fn member(archive: Vec<u8>, suffix: &str) -> Result<(String, Vec<u8>), ArchiveError> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive))
        .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
    for i in 0..zip.len() {
        let file = zip
            .by_index(i)
            .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
        let name = match file.name() {
            Ok(n) => n.into_owned(),
            Err(_) => continue,
        };
        if !file.is_file() || !name.ends_with(suffix) {
            continue;
        }
        if file.size() > MEMBER_CAP {
            return Err(ArchiveError::MemberTooLarge { name });
        }
        // The declared size may lie: read one byte past the cap to tell.
        let mut bytes = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0));
        file.take(MEMBER_CAP + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ArchiveError::Corrupt {
                name: name.clone(),
                message: e.to_string(),
            })?;
        if bytes.len() as u64 > MEMBER_CAP {
            return Err(ArchiveError::MemberTooLarge { name });
        }
        return Ok((name, bytes));
    }
    Err(ArchiveError::NoMember(suffix.to_string()))
}

/// [`member`] off the async threads (inflating up to 64 MiB takes a while).
pub(crate) async fn member_blocking(
    archive: Vec<u8>,
    suffix: String,
) -> Result<(String, Vec<u8>), AttemptFailure> {
    match tokio::task::spawn_blocking(move || member(archive, &suffix)).await {
        Ok(Ok(m)) => Ok(m),
        Ok(Err(e)) => Err(result_invalid(e.to_string())),
        // A panic while inflating says the archive is bad, not the service.
        Err(e) => Err(result_invalid(format!("the unzip task failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        zip_with(files, zip::CompressionMethod::Deflated)
    }

    fn zip_with(files: &[(&str, &[u8])], method: zip::CompressionMethod) -> Vec<u8> {
        let mut zw = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        for (name, bytes) in files {
            zw.start_file(*name, opts).unwrap();
            zw.write_all(bytes).unwrap();
        }
        zw.finish().unwrap().into_inner()
    }

    #[test]
    fn resolves_relative_and_absolute_urls() {
        assert_eq!(
            resolve("http://h:9/sc/x", "/static/a.zip").as_deref(),
            Some("http://h:9/sc/x/static/a.zip")
        );
        assert_eq!(
            resolve("http://h:9/sc/x/", "/static/a.zip").as_deref(),
            Some("http://h:9/sc/x/static/a.zip")
        );
        assert_eq!(
            resolve("http://h/sc/x", "https://cdn.example/a.zip").as_deref(),
            Some("https://cdn.example/a.zip")
        );
        assert_eq!(resolve("http://h", "static/a.zip"), None);
        assert_eq!(resolve("http://h", "//evil/a.zip"), None);
        assert_eq!(resolve("http://h", "file:///etc/passwd"), None);
    }

    #[test]
    fn origin_compares_scheme_host_and_port() {
        assert!(same_origin("http://h:9/sc/x", "http://H:9/static/a.zip"));
        assert!(same_origin("http://h/sc", "http://h:80/a.zip"));
        assert!(!same_origin("http://h:9/sc/x", "http://h:10/a.zip"));
        assert!(!same_origin("http://h/sc", "https://h/a.zip"));
        assert!(!same_origin("http://h/sc", "http://h.evil/a.zip"));
        assert!(!same_origin("http://h/sc", "http://user@h.evil/a.zip"));
        // The client reads `\` as the end of the host: the key must not go to `evil`.
        assert!(!same_origin("http://h:9/sc", "http://evil\\@h:9/a.zip"));
        assert!(!same_origin("http://h:9/sc", "http://evil.com\\@h:9/a.zip"));
    }

    #[test]
    fn finds_the_member_by_suffix() {
        let z = zip_of(&[
            ("r/r.md", b"# md"),
            ("r/r_middle.json", b"{\"pdf_info\":[]}"),
        ]);
        assert_eq!(
            member(z, "_middle.json"),
            Ok(("r/r_middle.json".to_string(), b"{\"pdf_info\":[]}".to_vec()))
        );
    }

    #[test]
    fn refuses_non_zip_missing_member_and_bombs() {
        assert!(matches!(
            member(b"not a zip archive\n".to_vec(), "_middle.json"),
            Err(ArchiveError::NotZip(_))
        ));
        let z = zip_of(&[("r/r.md", b"# md")]);
        assert_eq!(
            member(z, "_middle.json"),
            Err(ArchiveError::NoMember("_middle.json".into()))
        );
        let big = vec![b' '; (MEMBER_CAP + 1) as usize];
        // Stored: compressing 64 MiB in a debug build takes long; the cap is the same.
        let z = zip_with(&[("r/r_middle.json", &big)], zip::CompressionMethod::Stored);
        assert_eq!(
            member(z, "_middle.json"),
            Err(ArchiveError::MemberTooLarge {
                name: "r/r_middle.json".into()
            })
        );
    }
}
