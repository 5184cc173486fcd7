//! Finding a model's files: `graph.nnef`, the optional `graph.quant`, and the `.dat`
//! file of each `variable` label.
//!
//! A model is given as
//! * a folder holding `graph.nnef`, optional `graph.quant` and `<label>.dat` files
//!   (labels may contain `/`: `conv1/filter` → `conv1/filter.dat`);
//! * a `.tgz`/`.tar.gz`/`.tar` archive of such a folder, with or without one top-level
//!   folder (recognised by content: gzip magic or a tar header, not by file name). The
//!   archive is streamed: only `graph.nnef`, `graph.quant` and `.dat` entries are kept in
//!   memory, everything else (other files, directories, links, devices) is skipped;
//! * a bare `graph.nnef` file: then there is no data, and asking for a variable is an
//!   error that says so.
//!
//! Labels are checked before they touch the file system: no absolute paths, no `..` or
//! `.` or empty components, no backslashes or control characters. In a folder, the
//! resolved file is canonicalized and must stay inside the canonical model folder, so a
//! symlink cannot lead out of it.
//!
//! Resources are bounded before they are spent. Only regular files are opened (a FIFO
//! or a device given as the model or as a variable's file is refused, not waited on).
//! Texts are at most [`MAX_TEXT_BYTES`]; a `.dat` file's header is read first and the
//! file must be exactly as long as the header says, then only that much is read. An
//! archive may have at most [`MAX_ARCHIVE_ENTRIES`] entries and unpack to at most
//! [`MAX_ARCHIVE_BYTES`]; a compressed one that would unpack to more than
//! [`MAX_EXPANSION_RATIO`] times its size (past [`BOMB_FLOOR_BYTES`]) is refused as a
//! decompression bomb as soon as an entry header, or the unpacked stream, says so. The
//! tar reader holds extension headers (long names, pax records) in memory, so the stream
//! it reads is metered: at most [`MAX_EXTENSION_BYTES`] of them before each entry.
//!
//! This module only fetches bytes and texts. Parsing them is `syntax`, `quant` and `dat`.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The standard library every model is resolved against (our own text, see the file).
pub const STDLIB_TEXT: &str = include_str!("stdlib.nnef");
/// Display name of [`STDLIB_TEXT`] in diagnostics.
pub const STDLIB_NAME: &str = "<nnefc>/stdlib.nnef";

/// Largest single file we read: a `.dat` header plus the largest data length its u32
/// field can state. Nothing legitimate in a model is bigger.
pub const MAX_FILE_BYTES: u64 = 128 + u32::MAX as u64;
/// Largest `graph.nnef` or `graph.quant`: converter-written graphs of the largest
/// networks are a few MiB of text.
pub const MAX_TEXT_BYTES: u64 = 256 << 20;
/// Largest total an archive may unpack to (all entries, kept or skipped).
pub const MAX_ARCHIVE_BYTES: u64 = 16 << 30;
/// Most entries an archive may have (a model has a `.dat` file per variable).
pub const MAX_ARCHIVE_ENTRIES: u64 = 100_000;
/// A compressed archive may unpack to at most this many times its own size. Weights
/// compress by well under 2×; a decompression bomb by about 1000×.
pub const MAX_EXPANSION_RATIO: u64 = 100;
/// Unpacked sizes up to this are never called a bomb, whatever the ratio (small
/// models and all-zero test weights compress very well).
pub const BOMB_FLOOR_BYTES: u64 = 64 << 20;

/// Most bytes of extension headers (GNU long names, pax records) before one entry. The
/// tar reader keeps them in memory whole; real ones are a path or a few records long.
pub const MAX_EXTENSION_BYTES: u64 = 1 << 20;

/// The archive limits in force (the constants above; smaller ones in tests).
#[derive(Clone, Copy, Debug)]
pub struct ArchiveLimits {
    pub max_bytes: u64,
    pub max_entries: u64,
    pub max_ratio: u64,
    pub bomb_floor: u64,
}

impl ArchiveLimits {
    pub const DEFAULT: ArchiveLimits = ArchiveLimits {
        max_bytes: MAX_ARCHIVE_BYTES,
        max_entries: MAX_ARCHIVE_ENTRIES,
        max_ratio: MAX_EXPANSION_RATIO,
        bomb_floor: BOMB_FLOOR_BYTES,
    };

    /// The most a gzip of `packed` bytes may unpack to.
    fn unpack_limit(&self, packed: u64) -> u64 {
        packed
            .saturating_mul(self.max_ratio)
            .max(self.bomb_floor)
            .min(self.max_bytes)
    }
}

/// Why a model or one of its files could not be loaded. Every message names the path.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("model path {0} does not exist")]
    NotFound(String),
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{0} is a folder without a graph.nnef file")]
    NoGraph(String),
    #[error("{path} is not valid UTF-8 text (first bad byte at offset {offset})")]
    NotUtf8 { path: String, offset: usize },
    #[error("{path} is {size} bytes, more than the {limit} bytes allowed")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("{path} is {kind}, not a regular file")]
    NotRegular { path: String, kind: &'static str },
    #[error(
        "archive {path} unpacks to {unpacked} bytes or more from {packed} compressed bytes (over {ratio}x): refused as a decompression bomb"
    )]
    Bomb {
        path: String,
        unpacked: u64,
        packed: u64,
        ratio: u64,
    },
    #[error("archive {path} has more than {limit} entries")]
    TooManyEntries { path: String, limit: u64 },
    #[error(
        "{path} is gzip-compressed but does not hold a tar archive; a .tgz model is a gzip-compressed tar of the model folder"
    )]
    GzipNotTar { path: String },
    #[error("{path}: {source}")]
    Dat {
        path: String,
        source: super::dat::DatError,
    },
    #[error("cannot read archive {path}: {message}")]
    Archive { path: String, message: String },
    #[error(
        "archive {archive} has an entry with an unsafe path '{entry}' (absolute or containing '..')"
    )]
    UnsafeEntry { archive: String, entry: String },
    #[error(
        "archive {archive} has no graph.nnef at its top level or inside one top-level folder{found}"
    )]
    ArchiveWithoutGraph { archive: String, found: String },
    #[error("invalid variable label '{label}': {reason}")]
    BadLabel { label: String, reason: &'static str },
    #[error("no data for variable '{label}': {path} does not exist")]
    MissingVariable { label: String, path: String },
    #[error("variable '{label}': {path} is not a regular file")]
    NotAFile { label: String, path: String },
    #[error("variable '{label}': {path} resolves to {target}, outside the model folder {root}")]
    Escapes {
        label: String,
        path: String,
        target: String,
        root: String,
    },
    #[error(
        "no data for variable '{label}': the model was given as the bare file {path}; give the folder or archive that holds graph.nnef and the .dat files"
    )]
    BareGraph { label: String, path: String },
}

/// A text file of the model with the name diagnostics should show.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceText {
    /// Display path: a file path, or `archive.tgz:entry/path` inside an archive.
    pub path: String,
    pub text: String,
}

/// Where the variable data lives.
#[derive(Debug)]
enum Store {
    /// A folder on disk; `root` is canonical, `shown` as the user gave it.
    Folder { root: PathBuf, shown: PathBuf },
    /// An archive read into memory: entry path (after the top-level folder) → bytes.
    Archive {
        shown: String,
        prefix: String,
        entries: HashMap<String, Vec<u8>>,
    },
    /// A bare `graph.nnef`: no data at all.
    Bare { shown: String },
}

/// A loaded model: its texts, and access to its variables' bytes by label.
#[derive(Debug)]
pub struct ModelSource {
    pub graph: SourceText,
    pub quant: Option<SourceText>,
    store: Store,
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: show(path),
        source,
    }
}

fn utf8(bytes: Vec<u8>, path: String) -> Result<String, LoadError> {
    String::from_utf8(bytes).map_err(|e| LoadError::NotUtf8 {
        path,
        offset: e.utf8_error().valid_up_to(),
    })
}

/// What kind of file `meta` describes, for "not a regular file" messages.
fn file_kind(meta: &fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        } else if t.is_socket() {
            return "a socket";
        } else if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    "a special file"
}

/// Opens a regular file (checked with `metadata` first, so a FIFO is refused instead of
/// blocking in `open`) and returns it with its size.
pub fn open_regular(path: &Path) -> Result<(fs::File, u64), LoadError> {
    let meta = fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => LoadError::NotFound(show(path)),
        _ => LoadError::Io {
            path: show(path),
            source: e,
        },
    })?;
    if !meta.is_file() {
        return Err(LoadError::NotRegular {
            path: show(path),
            kind: file_kind(&meta),
        });
    }
    let file = fs::File::open(path).map_err(io_err(path))?;
    Ok((file, meta.len()))
}

/// Reads at most `limit` bytes of `reader`, whose expected length is `size`; more is an
/// error (the file grew while we read it, or a header lied).
fn read_limited(
    reader: impl Read,
    size: u64,
    limit: u64,
    shown: impl Fn() -> String,
) -> Result<Vec<u8>, LoadError> {
    let too_large = |size| LoadError::TooLarge {
        path: shown(),
        size,
        limit,
    };
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    reader
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| LoadError::Io {
            path: shown(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Reads a `graph.nnef` or `graph.quant` file as UTF-8 text of at most
/// [`MAX_TEXT_BYTES`].
fn read_text(path: &Path) -> Result<String, LoadError> {
    let (file, size) = open_regular(path)?;
    let bytes = read_limited(file, size, MAX_TEXT_BYTES, || show(path))?;
    utf8(bytes, show(path))
}

/// Reads a `.dat` file: the 128-byte header first, checked against the file's length
/// (`dat::check_header`), then exactly the data length it states. A 3 GB file whose
/// header says 16 bytes is refused after reading 128 bytes.
pub fn read_dat_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    use super::dat::{HEADER_LEN, check_header};
    let (file, size) = open_regular(path)?;
    let mut file = io::BufReader::new(file);
    let mut bytes = Vec::with_capacity(HEADER_LEN);
    (&mut file)
        .take(HEADER_LEN as u64)
        .read_to_end(&mut bytes)
        .map_err(io_err(path))?;
    check_header(&bytes, size).map_err(|source| LoadError::Dat {
        path: show(path),
        source,
    })?;
    let data_len = size - HEADER_LEN as u64;
    let data = read_limited(file, data_len, MAX_FILE_BYTES, || show(path))?;
    if data.len() as u64 != data_len {
        return Err(LoadError::Io {
            path: show(path),
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file changed size while it was read",
            ),
        });
    }
    bytes.extend_from_slice(&data);
    Ok(bytes)
}

/// Loads a model from a folder, an archive or a bare `graph.nnef` (see the module doc).
pub fn load_model(path: &Path) -> Result<ModelSource, LoadError> {
    load_model_with(path, &ArchiveLimits::DEFAULT)
}

/// [`load_model`] with other archive limits.
pub fn load_model_with(path: &Path, limits: &ArchiveLimits) -> Result<ModelSource, LoadError> {
    let meta = fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => LoadError::NotFound(show(path)),
        _ => LoadError::Io {
            path: show(path),
            source: e,
        },
    })?;
    if meta.is_dir() {
        return load_folder(path);
    }
    let (file, size) = open_regular(path)?;
    let mut file = io::BufReader::new(file);
    // Enough of the start to recognise gzip (2 bytes) or a tar header (`ustar` at 257).
    let mut head = Vec::with_capacity(512);
    (&mut file)
        .take(512)
        .read_to_end(&mut head)
        .map_err(io_err(path))?;
    let rest = io::Cursor::new(head.clone()).chain(file);
    if head.starts_with(&[0x1F, 0x8B]) {
        return load_gzip(rest, size, show(path), limits);
    }
    if is_tar(&head) {
        return load_archive(rest, show(path), None, limits);
    }
    let bytes = read_limited(rest, size, MAX_TEXT_BYTES, || show(path))?;
    let graph = SourceText {
        path: show(path),
        text: utf8(bytes, show(path))?,
    };
    Ok(ModelSource {
        graph,
        quant: None,
        store: Store::Bare { shown: show(path) },
    })
}

/// A reader that counts the bytes it passes and fails once they exceed `limit`, and that
/// labels the errors of the reader it wraps (the gzip decoder) as corrupt data.
struct Unpacked<R> {
    inner: R,
    count: u64,
    limit: u64,
}

impl<R: Read> Read for Unpacked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self
            .inner
            .read(buf)
            .map_err(|e| io::Error::new(e.kind(), format!("gzip data is corrupt: {e}")))?;
        self.count += n as u64;
        if self.count > self.limit {
            return Err(io::Error::other(BombMarker));
        }
        Ok(n)
    }
}

/// The error [`Unpacked`] raises at its limit, recognised again after `tar` wrapped it.
#[derive(Debug)]
struct BombMarker;

impl std::fmt::Display for BombMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("unpacked size limit reached")
    }
}

impl std::error::Error for BombMarker {}

fn load_gzip(
    reader: impl Read,
    packed: u64,
    shown: String,
    limits: &ArchiveLimits,
) -> Result<ModelSource, LoadError> {
    let mut unpacked = Unpacked {
        inner: flate2::read::MultiGzDecoder::new(reader),
        count: 0,
        limit: limits.unpack_limit(packed),
    };
    let archive_err = |e: io::Error| LoadError::Archive {
        path: shown.clone(),
        message: e.to_string(),
    };
    let mut head = Vec::with_capacity(512);
    (&mut unpacked)
        .take(512)
        .read_to_end(&mut head)
        .map_err(archive_err)?;
    if !is_tar(&head) {
        return Err(LoadError::GzipNotTar { path: shown });
    }
    let rest = io::Cursor::new(head).chain(unpacked);
    load_archive(rest, shown, Some(packed), limits)
}

/// A POSIX/GNU tar header has `ustar` at offset 257.
fn is_tar(bytes: &[u8]) -> bool {
    bytes.get(257..262) == Some(b"ustar")
}

fn load_folder(dir: &Path) -> Result<ModelSource, LoadError> {
    let root = dir.canonicalize().map_err(io_err(dir))?;
    let graph_path = dir.join("graph.nnef");
    if !graph_path.exists() {
        return Err(LoadError::NoGraph(show(dir)));
    }
    let graph = SourceText {
        path: show(&graph_path),
        text: read_text(&graph_path)?,
    };
    let quant_path = dir.join("graph.quant");
    // `exists`, not `is_file`: a FIFO or folder named graph.quant is refused by
    // `read_text`, not silently ignored.
    let quant = if quant_path.exists() {
        Some(SourceText {
            path: show(&quant_path),
            text: read_text(&quant_path)?,
        })
    } else {
        None
    };
    Ok(ModelSource {
        graph,
        quant,
        store: Store::Folder {
            root,
            shown: dir.to_path_buf(),
        },
    })
}

/// Splits an archive entry path into clean components: `.` and empty components are
/// dropped (`./a//b` is `a/b`); absolute paths and `..` are refused.
fn clean_entry_path(raw: &str) -> Option<Vec<&str>> {
    if raw.starts_with('/') || raw.contains('\\') {
        return None;
    }
    let parts: Vec<&str> = raw
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.contains(&"..") {
        None
    } else {
        Some(parts)
    }
}

/// Size of a tar header block (and the unit entry data is padded to).
const HEADER_BYTES: u64 = 512;

/// The tar stream as the tar reader sees it: counts the bytes it hands out and refuses
/// to go past `allowed` (set by [`load_archive`] each time an entry is yielded).
struct Metered<R> {
    inner: R,
    consumed: Rc<Cell<u64>>,
    allowed: Rc<Cell<u64>>,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = self.allowed.get().saturating_sub(self.consumed.get());
        if room == 0 && !buf.is_empty() {
            return Err(io::Error::other(ExtensionMarker));
        }
        let len = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..len])?;
        self.consumed.set(self.consumed.get() + n as u64);
        Ok(n)
    }
}

/// The error [`Metered`] raises when extension headers run past their allowance.
#[derive(Debug)]
struct ExtensionMarker;

impl std::fmt::Display for ExtensionMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("extension headers too long")
    }
}

impl std::error::Error for ExtensionMarker {}

/// Whether an archive entry (path after cleaning) is something a model reads.
fn is_model_file(parts: &[&str]) -> bool {
    matches!(parts.last(), Some(&("graph.nnef" | "graph.quant")))
        || parts.last().is_some_and(|n| n.ends_with(".dat"))
}

/// Reads the entries of a tar stream. `packed` is the compressed size of a gzip archive,
/// for the decompression-bomb rule.
fn load_archive(
    reader: impl Read,
    shown: String,
    packed: Option<u64>,
    limits: &ArchiveLimits,
) -> Result<ModelSource, LoadError> {
    let limit = packed.map_or(limits.max_bytes, |p| limits.unpack_limit(p));
    let bomb = |unpacked: u64| LoadError::Bomb {
        path: shown.clone(),
        unpacked,
        packed: packed.unwrap_or(0),
        ratio: limits.max_ratio,
    };
    let archive_err = |e: io::Error| {
        if e.get_ref().is_some_and(|inner| inner.is::<BombMarker>()) {
            return bomb(limit);
        }
        if e.get_ref()
            .is_some_and(|inner| inner.is::<ExtensionMarker>())
        {
            return LoadError::Archive {
                path: shown.clone(),
                message: format!(
                    "an entry's extension headers (long name or pax records) exceed {MAX_EXTENSION_BYTES} bytes"
                ),
            };
        }
        LoadError::Archive {
            path: shown.clone(),
            message: e.to_string(),
        }
    };
    // The tar reader reads extension headers into memory before it yields the entry
    // they belong to: the stream is allowed only the current entry's data, one header
    // and MAX_EXTENSION_BYTES past the point where the last entry was yielded.
    let consumed = Rc::new(Cell::new(0u64));
    let allowed = Rc::new(Cell::new(HEADER_BYTES + MAX_EXTENSION_BYTES));
    let reader = Metered {
        inner: reader,
        consumed: consumed.clone(),
        allowed: allowed.clone(),
    };
    let mut archive = tar::Archive::new(reader);
    let mut entries: HashMap<String, Vec<u8>> = HashMap::new();
    let mut total: u64 = 0;
    let mut count: u64 = 0;
    for entry in archive.entries().map_err(archive_err)? {
        let mut entry = entry.map_err(archive_err)?;
        allowed.set(
            consumed
                .get()
                .saturating_add(entry.size().div_ceil(HEADER_BYTES) * HEADER_BYTES)
                .saturating_add(2 * HEADER_BYTES + MAX_EXTENSION_BYTES),
        );
        count += 1;
        if count > limits.max_entries {
            return Err(LoadError::TooManyEntries {
                path: shown,
                limit: limits.max_entries,
            });
        }
        let size = entry.size();
        let kind = entry.header().entry_type();
        let mut keep = None;
        if kind.is_file() || kind.is_contiguous() {
            // Directories, links and devices are not model content.
            let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let parts = clean_entry_path(&raw).ok_or_else(|| LoadError::UnsafeEntry {
                archive: shown.clone(),
                entry: raw.clone(),
            })?;
            if is_model_file(&parts) {
                let max = if parts.last().is_some_and(|n| n.ends_with(".dat")) {
                    MAX_FILE_BYTES
                } else {
                    MAX_TEXT_BYTES
                };
                if size > max {
                    return Err(LoadError::TooLarge {
                        path: format!("{shown}:{raw}"),
                        size,
                        limit: max,
                    });
                }
                keep = Some(parts.join("/"));
            }
        }
        // Declared sizes count whether the entry is kept or skipped: skipping still
        // decompresses it. A bomb is refused here, from its header, before any of its
        // data is unpacked.
        total = total.saturating_add(size);
        if total > limit {
            return Err(match packed {
                Some(_) if limit < limits.max_bytes => bomb(total),
                _ => LoadError::TooLarge {
                    path: shown,
                    size: total,
                    limit: limits.max_bytes,
                },
            });
        }
        let Some(key) = keep else {
            continue;
        };
        // `size` is bounded above, and the tar reader stops at the end of the input,
        // so this allocates no more than the archive really holds.
        let mut data = Vec::new();
        entry.read_to_end(&mut data).map_err(archive_err)?;
        // Later entries replace earlier ones, as `tar -x` does.
        entries.insert(key, data);
    }

    // graph.nnef at the top level wins; otherwise exactly one `<folder>/graph.nnef`.
    let prefix = if entries.contains_key("graph.nnef") {
        String::new()
    } else {
        let mut candidates: Vec<&String> = entries
            .keys()
            .filter(|k| k.matches('/').count() == 1 && k.ends_with("/graph.nnef"))
            .collect();
        candidates.sort();
        match candidates.as_slice() {
            [one] => one.trim_end_matches("graph.nnef").to_string(),
            [] => {
                return Err(LoadError::ArchiveWithoutGraph {
                    archive: shown,
                    found: String::new(),
                });
            }
            many => {
                let list: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
                let found = format!(" (found several: {})", list.join(", "));
                return Err(LoadError::ArchiveWithoutGraph {
                    archive: shown,
                    found,
                });
            }
        }
    };
    let take_text = |entries: &mut HashMap<String, Vec<u8>>,
                     name: &str|
     -> Result<Option<SourceText>, LoadError> {
        let key = format!("{prefix}{name}");
        match entries.remove(&key) {
            Some(bytes) => {
                let path = format!("{shown}:{key}");
                Ok(Some(SourceText {
                    text: utf8(bytes, path.clone())?,
                    path,
                }))
            }
            None => Ok(None),
        }
    };
    let graph =
        take_text(&mut entries, "graph.nnef")?.ok_or_else(|| LoadError::ArchiveWithoutGraph {
            archive: shown.clone(),
            found: String::new(),
        })?;
    let quant = take_text(&mut entries, "graph.quant")?;
    Ok(ModelSource {
        graph,
        quant,
        store: Store::Archive {
            shown,
            prefix,
            entries,
        },
    })
}

/// The label with control characters escaped, so that messages stay on one line.
fn printable(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Checks a label and returns its components (spec §7.1: `/` separates sub-folders).
pub fn label_components(label: &str) -> Result<Vec<&str>, LoadError> {
    let bad = |reason| {
        Err(LoadError::BadLabel {
            label: printable(label),
            reason,
        })
    };
    if label.is_empty() {
        return bad("it is empty");
    }
    if label.starts_with('/') {
        return bad("it is an absolute path; labels are relative to the model folder");
    }
    if label.contains('\\') {
        return bad("it contains a backslash; use '/' to separate folders");
    }
    if label.chars().any(|c| c.is_control()) {
        return bad("it contains a control character");
    }
    let parts: Vec<&str> = label.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return bad("it has an empty path component ('//' or a trailing '/')");
    }
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return bad("it has a '.' or '..' component; labels must stay inside the model");
    }
    Ok(parts)
}

impl ModelSource {
    /// Where the data of `label` is (or would be), for messages.
    pub fn variable_path(&self, label: &str) -> String {
        match &self.store {
            Store::Folder { shown, .. } => show(&shown.join(format!("{label}.dat"))),
            Store::Archive { shown, prefix, .. } => format!("{shown}:{prefix}{label}.dat"),
            Store::Bare { shown } => format!("{shown} (no data files)"),
        }
    }

    /// The bytes of `<label>.dat`. Never reads outside the model (see the module doc).
    pub fn variable(&self, label: &str) -> Result<Cow<'_, [u8]>, LoadError> {
        let parts = label_components(label)?;
        match &self.store {
            Store::Bare { shown } => Err(LoadError::BareGraph {
                label: label.to_string(),
                path: shown.clone(),
            }),
            Store::Archive {
                prefix, entries, ..
            } => {
                let key = format!("{prefix}{}.dat", parts.join("/"));
                entries
                    .get(&key)
                    .map(|b| Cow::Borrowed(b.as_slice()))
                    .ok_or_else(|| LoadError::MissingVariable {
                        label: label.to_string(),
                        path: self.variable_path(label),
                    })
            }
            Store::Folder { root, shown } => {
                let mut rel = PathBuf::new();
                for p in &parts {
                    rel.push(p);
                }
                rel.set_file_name(format!("{}.dat", parts.last().copied().unwrap_or_default()));
                let path = shown.join(&rel);
                let target = match path.canonicalize() {
                    Ok(t) => t,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return Err(LoadError::MissingVariable {
                            label: label.to_string(),
                            path: show(&path),
                        });
                    }
                    Err(e) => {
                        return Err(LoadError::Io {
                            path: show(&path),
                            source: e,
                        });
                    }
                };
                if !target.starts_with(root) {
                    return Err(LoadError::Escapes {
                        label: label.to_string(),
                        path: show(&path),
                        target: show(&target),
                        root: show(root),
                    });
                }
                if !target.is_file() {
                    return Err(LoadError::NotAFile {
                        label: label.to_string(),
                        path: show(&path),
                    });
                }
                read_dat_file(&target).map(Cow::Owned)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::dat::{self, read_dat, write_dat_f32};
    use crate::ir::DType;
    use expect_test::expect;
    use std::io::Write;

    const GRAPH: &str = "version 1.0;\ngraph g( x ) -> ( y ) { x = external(shape = [1]); }\n";
    const QUANT: &str = "\"x\": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n";

    fn dat(v: f32) -> Vec<u8> {
        write_dat_f32(&[1], &[v]).unwrap()
    }

    /// Error text with the temporary folder's path replaced by `<tmp>`.
    fn err_text(r: Result<impl std::fmt::Debug, LoadError>, tmp: &Path) -> String {
        match r {
            Ok(v) => format!("ok {v:?}"),
            Err(e) => e.to_string(),
        }
        .replace(&show(&tmp.canonicalize().unwrap()), "<tmp>")
        .replace(&show(tmp), "<tmp>")
    }

    fn first_value(bytes: &[u8]) -> f32 {
        read_dat(bytes).unwrap().data.as_f32().unwrap()[0]
    }

    /// A model folder: graph, quant, a top-level and a nested variable.
    fn model_folder(dir: &Path) {
        fs::create_dir_all(dir.join("conv1")).unwrap();
        fs::write(dir.join("graph.nnef"), GRAPH).unwrap();
        fs::write(dir.join("graph.quant"), QUANT).unwrap();
        fs::write(dir.join("w.dat"), dat(1.0)).unwrap();
        fs::write(dir.join("conv1/filter.dat"), dat(2.0)).unwrap();
    }

    #[test]
    fn folder_model() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("m");
        model_folder(&dir);
        let m = load_model(&dir).unwrap();
        assert_eq!(m.graph.text, GRAPH);
        assert_eq!(m.graph.path, show(&dir.join("graph.nnef")));
        assert_eq!(m.quant.as_ref().map(|q| q.text.as_str()), Some(QUANT));
        assert_eq!(first_value(&m.variable("w").unwrap()), 1.0);
        assert_eq!(first_value(&m.variable("conv1/filter").unwrap()), 2.0);
        expect![[r#"no data for variable 'nope': <tmp>/m/nope.dat does not exist"#]]
            .assert_eq(&err_text(m.variable("nope"), tmp.path()));

        fs::remove_file(dir.join("graph.quant")).unwrap();
        assert!(load_model(&dir).unwrap().quant.is_none());
        fs::remove_file(dir.join("graph.nnef")).unwrap();
        expect![[r#"<tmp>/m is a folder without a graph.nnef file"#]]
            .assert_eq(&err_text(load_model(&dir), tmp.path()));
        expect![[r#"model path <tmp>/absent does not exist"#]].assert_eq(&err_text(
            load_model(&tmp.path().join("absent")),
            tmp.path(),
        ));
    }

    #[test]
    fn labels_cannot_escape() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("m");
        model_folder(&dir);
        fs::write(tmp.path().join("secret.dat"), dat(9.0)).unwrap();
        fs::create_dir(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/x.dat"), dat(9.0)).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret.dat"), dir.join("link.dat")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), dir.join("outdir")).unwrap();
        std::os::unix::fs::symlink(dir.join("w.dat"), dir.join("inner.dat")).unwrap();
        std::os::unix::fs::symlink("conv1", dir.join("alias")).unwrap();
        fs::create_dir(dir.join("folder.dat")).unwrap();
        let m = load_model(&dir).unwrap();
        let labels = [
            "",
            "/etc/passwd",
            "../secret",
            "conv1/../../secret",
            "a//b",
            "conv1/",
            "./w",
            "conv1/./filter",
            "..\\secret",
            "w\0",
            "link",
            "outdir/x",
            "folder",
            "inner",
            "alias/filter",
        ];
        let out: Vec<String> = labels
            .iter()
            .map(|l| {
                let r = m.variable(l).map(|b| first_value(&b));
                format!("{l:?}: {}", err_text(r, tmp.path()))
            })
            .collect();
        expect![[r#"
            "": invalid variable label '': it is empty
            "/etc/passwd": invalid variable label '/etc/passwd': it is an absolute path; labels are relative to the model folder
            "../secret": invalid variable label '../secret': it has a '.' or '..' component; labels must stay inside the model
            "conv1/../../secret": invalid variable label 'conv1/../../secret': it has a '.' or '..' component; labels must stay inside the model
            "a//b": invalid variable label 'a//b': it has an empty path component ('//' or a trailing '/')
            "conv1/": invalid variable label 'conv1/': it has an empty path component ('//' or a trailing '/')
            "./w": invalid variable label './w': it has a '.' or '..' component; labels must stay inside the model
            "conv1/./filter": invalid variable label 'conv1/./filter': it has a '.' or '..' component; labels must stay inside the model
            "..\\secret": invalid variable label '..\secret': it contains a backslash; use '/' to separate folders
            "w\0": invalid variable label 'w\u{0}': it contains a control character
            "link": variable 'link': <tmp>/m/link.dat resolves to <tmp>/secret.dat, outside the model folder <tmp>/m
            "outdir/x": variable 'outdir/x': <tmp>/m/outdir/x.dat resolves to <tmp>/outside/x.dat, outside the model folder <tmp>/m
            "folder": variable 'folder': <tmp>/m/folder.dat is not a regular file
            "inner": ok 1.0
            "alias/filter": ok 2.0"#]]
        .assert_eq(&out.join("\n"));
    }

    /// Builds a tar archive from (path, content) pairs; `None` content makes a symlink.
    fn tar_bytes(files: &[(&str, Option<&[u8]>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, content) in files {
            let mut h = tar::Header::new_gnu();
            match content {
                Some(data) => {
                    h.set_size(data.len() as u64);
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(0o644);
                    b.append_data(&mut h, path, *data).unwrap();
                }
                None => {
                    h.set_size(0);
                    h.set_entry_type(tar::EntryType::Symlink);
                    b.append_link(&mut h, path, "/etc/passwd").unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn archives() {
        let tmp = tempfile::tempdir().unwrap();
        let (w, f) = (dat(1.0), dat(2.0));
        let flat = tar_bytes(&[
            ("graph.nnef", Some(GRAPH.as_bytes())),
            ("graph.quant", Some(QUANT.as_bytes())),
            ("w.dat", Some(&w)),
            ("conv1/filter.dat", Some(&f)),
            ("evil.dat", None),
        ]);
        let nested = tar_bytes(&[
            ("./model/graph.nnef", Some(GRAPH.as_bytes())),
            ("./model/w.dat", Some(&w)),
            ("./model/conv1/filter.dat", Some(&f)),
            ("._junk", Some(b"macOS metadata")),
        ]);
        let cases: [(&str, Vec<u8>, bool); 4] = [
            ("flat.tar", flat.clone(), true),
            ("flat.tgz", gzip(&flat), true),
            ("nested.tar.gz", gzip(&nested), false),
            ("nested.tar", nested, false),
        ];
        for (name, bytes, has_quant) in cases {
            let path = tmp.path().join(name);
            fs::write(&path, bytes).unwrap();
            let m = load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(m.graph.text, GRAPH, "{name}");
            assert_eq!(m.quant.is_some(), has_quant, "{name}");
            assert_eq!(first_value(&m.variable("w").unwrap()), 1.0, "{name}");
            assert_eq!(
                first_value(&m.variable("conv1/filter").unwrap()),
                2.0,
                "{name}"
            );
            assert!(m.variable("../w").is_err(), "{name}");
        }
        let m = load_model(&tmp.path().join("flat.tgz")).unwrap();
        let m2 = load_model(&tmp.path().join("nested.tar")).unwrap();
        let out = [
            err_text(Ok(&m.graph.path), tmp.path()),
            err_text(Ok(&m2.graph.path), tmp.path()),
            err_text(m.variable("evil").map(|_| ()), tmp.path()),
            err_text(m2.variable("graph").map(|_| ()), tmp.path()),
        ];
        expect![[r#"
            ok "<tmp>/flat.tgz:graph.nnef"
            ok "<tmp>/nested.tar:model/graph.nnef"
            no data for variable 'evil': <tmp>/flat.tgz:evil.dat does not exist
            no data for variable 'graph': <tmp>/nested.tar:model/graph.dat does not exist"#]]
        .assert_eq(&out.join("\n"));
    }

    #[test]
    fn bad_archives() {
        let tmp = tempfile::tempdir().unwrap();
        // An entry named with `..`: the tar builder refuses such paths, so write the
        // name field by hand.
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        let name = b"../escape.dat";
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        h.set_size(3);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, &b"abc"[..]).unwrap();
        let dotdot = b.into_inner().unwrap();
        // An entry whose header claims 1 TiB.
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_path("graph.nnef").unwrap();
        h.set_size(1 << 40);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, &b""[..]).unwrap();
        let huge = b.into_inner().unwrap();
        let mut truncated_gz = gzip(&tar_bytes(&[("graph.nnef", Some(GRAPH.as_bytes()))]));
        truncated_gz.truncate(30);
        let cases = [
            ("dotdot.tar", dotdot),
            ("huge.tar", huge),
            ("nograph.tar", tar_bytes(&[("w.dat", Some(b"x"))])),
            (
                "two.tar",
                tar_bytes(&[
                    ("a/graph.nnef", Some(GRAPH.as_bytes())),
                    ("b/graph.nnef", Some(GRAPH.as_bytes())),
                ]),
            ),
            (
                "latin1.tar",
                tar_bytes(&[("graph.nnef", Some(b"version 1.0; # caf\xe9"))]),
            ),
            ("truncated.tgz", truncated_gz),
        ];
        let out: Vec<String> = cases
            .into_iter()
            .map(|(name, bytes)| {
                let path = tmp.path().join(name);
                fs::write(&path, bytes).unwrap();
                format!(
                    "{name}: {}",
                    err_text(load_model(&path).map(|_| ()), tmp.path())
                )
            })
            .collect();
        expect![[r#"
            dotdot.tar: archive <tmp>/dotdot.tar has an entry with an unsafe path '../escape.dat' (absolute or containing '..')
            huge.tar: <tmp>/huge.tar:graph.nnef is 1099511627776 bytes, more than the 268435456 bytes allowed
            nograph.tar: archive <tmp>/nograph.tar has no graph.nnef at its top level or inside one top-level folder
            two.tar: archive <tmp>/two.tar has no graph.nnef at its top level or inside one top-level folder (found several: a/graph.nnef, b/graph.nnef)
            latin1.tar: <tmp>/latin1.tar:graph.nnef is not valid UTF-8 text (first bad byte at offset 18)
            truncated.tgz: cannot read archive <tmp>/truncated.tgz: gzip data is corrupt: incomplete deflate stream"#]]
        .assert_eq(&out.join("\n"));
    }

    /// A tar whose one entry's header claims `size` bytes but carries only `data`: the
    /// loader must refuse it from the header alone, before unpacking anything.
    fn lying_tar(name: &str, size: u64, data: &[u8]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_path(name).unwrap();
        h.set_size(size);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, data).unwrap();
        b.into_inner().unwrap()
    }

    /// One case per archive resource: a decompression bomb refused from its header, one
    /// refused while streaming (headers that look harmless), too many entries, a gzip
    /// that is not a tar. Limits are lowered so the cases stay small; each must fail
    /// fast, with the message that names the limit.
    #[test]
    fn hostile_archives() {
        let tmp = tempfile::tempdir().unwrap();
        let small = ArchiveLimits {
            max_bytes: 1 << 30,
            max_entries: 50,
            max_ratio: 100,
            bomb_floor: 1 << 20,
        };
        // 8 MiB of zeros compress to about 8 KiB: over 100× and past the 1 MiB floor.
        let zeros = vec![0u8; 8 << 20];
        let honest_bomb = gzip(&tar_bytes(&[
            ("graph.nnef", Some(GRAPH.as_bytes())),
            ("w.dat", Some(&zeros)),
        ]));
        // A GNU long name is read into memory by the tar reader itself, before the
        // entry it names: the metered stream stops it, compressed or not.
        let long_name = {
            let mut b = tar::Builder::new(Vec::new());
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::GNULongName);
            h.set_path("././@LongLink").unwrap();
            h.set_size(zeros.len() as u64);
            h.set_cksum();
            b.append(&h, zeros.as_slice()).unwrap();
            b.into_inner().unwrap()
        };
        // Long names each within the per-entry allowance, but together far over 100× the
        // compressed size: the count of unpacked bytes stops the decompression.
        let long_names = {
            let mut b = tar::Builder::new(Vec::new());
            for i in 0..12 {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::GNULongName);
                h.set_path("././@LongLink").unwrap();
                h.set_size(900 << 10);
                h.set_cksum();
                b.append(&h, &zeros[..900 << 10]).unwrap();
                let mut h = tar::Header::new_gnu();
                h.set_path(format!("junk{i}")).unwrap();
                h.set_size(1);
                h.set_entry_type(tar::EntryType::Regular);
                h.set_cksum();
                b.append(&h, &b"x"[..]).unwrap();
            }
            gzip(&b.into_inner().unwrap())
        };
        let many: Vec<(String, Vec<u8>)> = (0..60)
            .map(|i| (format!("junk{i}.txt"), b"x".to_vec()))
            .collect();
        let many_refs: Vec<(&str, Option<&[u8]>)> = many
            .iter()
            .map(|(n, d)| (n.as_str(), Some(d.as_slice())))
            .collect();
        let cases: Vec<(&str, Vec<u8>, &ArchiveLimits)> = vec![
            (
                "header_bomb.tgz",
                gzip(&lying_tar("w.dat", 3 << 30, b"abc")),
                &ArchiveLimits::DEFAULT,
            ),
            ("honest_bomb.tgz", honest_bomb, &small),
            ("long_name.tgz", gzip(&long_name), &small),
            ("long_name.tar", long_name, &ArchiveLimits::DEFAULT),
            ("long_names.tgz", long_names, &small),
            ("many.tar", tar_bytes(&many_refs), &small),
            (
                "not_a_tar.gz",
                gzip(b"version 1.0; graph g() -> () {}"),
                &ArchiveLimits::DEFAULT,
            ),
            ("empty.gz", gzip(b""), &ArchiveLimits::DEFAULT),
            (
                "huge_total.tar",
                lying_tar("skipped.bin", 2 << 30, b"abc"),
                &small,
            ),
        ];
        let out: Vec<String> = cases
            .into_iter()
            .map(|(name, bytes, limits)| {
                let path = tmp.path().join(name);
                fs::write(&path, bytes).unwrap();
                let start = std::time::Instant::now();
                let r = load_model_with(&path, limits).map(|_| ());
                assert!(
                    start.elapsed().as_secs() < 5,
                    "{name}: {:?}",
                    start.elapsed()
                );
                format!("{name}: {}", err_text(r, tmp.path()))
            })
            .collect();
        expect![[r#"
            header_bomb.tgz: archive <tmp>/header_bomb.tgz unpacks to 3221225472 bytes or more from 87 compressed bytes (over 100x): refused as a decompression bomb
            honest_bomb.tgz: archive <tmp>/honest_bomb.tgz unpacks to 8388674 bytes or more from 38551 compressed bytes (over 100x): refused as a decompression bomb
            long_name.tgz: cannot read archive <tmp>/long_name.tgz: an entry's extension headers (long name or pax records) exceed 1048576 bytes
            long_name.tar: cannot read archive <tmp>/long_name.tar: an entry's extension headers (long name or pax records) exceed 1048576 bytes
            long_names.tgz: archive <tmp>/long_names.tgz unpacks to 5180600 bytes or more from 51806 compressed bytes (over 100x): refused as a decompression bomb
            many.tar: archive <tmp>/many.tar has more than 50 entries
            not_a_tar.gz: <tmp>/not_a_tar.gz is gzip-compressed but does not hold a tar archive; a .tgz model is a gzip-compressed tar of the model folder
            empty.gz: <tmp>/empty.gz is gzip-compressed but does not hold a tar archive; a .tgz model is a gzip-compressed tar of the model folder
            huge_total.tar: <tmp>/huge_total.tar is 2147483648 bytes, more than the 1073741824 bytes allowed"#]].assert_eq(&out.join("\n"));
    }

    /// Special and oversized files: a FIFO as the model, as `graph.nnef` and as a
    /// variable's `.dat` is refused without blocking; a 3 GiB (sparse) `.dat` whose header
    /// says 16 bytes, and a 1 GiB `graph.nnef`, are refused after reading their header.
    #[test]
    fn hostile_files() {
        let tmp = tempfile::tempdir().unwrap();
        let mkfifo = |p: &Path| {
            let ok = std::process::Command::new("mkfifo")
                .arg(p)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "mkfifo {}", p.display());
        };
        let dir = tmp.path().join("m");
        model_folder(&dir);
        mkfifo(&dir.join("fifo.dat"));
        mkfifo(&tmp.path().join("model.fifo"));
        let big = dir.join("big.dat");
        let mut header = write_dat_f32(&[4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        header.truncate(dat::HEADER_LEN);
        fs::write(&big, &header).unwrap();
        fs::OpenOptions::new()
            .write(true)
            .open(&big)
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let fifo_graph = tmp.path().join("fifo_graph");
        fs::create_dir(&fifo_graph).unwrap();
        mkfifo(&fifo_graph.join("graph.nnef"));
        let fifo_quant = tmp.path().join("fifo_quant");
        fs::create_dir(&fifo_quant).unwrap();
        fs::write(fifo_quant.join("graph.nnef"), GRAPH).unwrap();
        mkfifo(&fifo_quant.join("graph.quant"));
        let huge_graph = tmp.path().join("huge_graph");
        fs::create_dir(&huge_graph).unwrap();
        let g = fs::File::create(huge_graph.join("graph.nnef")).unwrap();
        g.set_len(1 << 30).unwrap();
        let m = load_model(&dir).unwrap();
        let out = [
            err_text(
                load_model(&tmp.path().join("model.fifo")).map(|_| ()),
                tmp.path(),
            ),
            err_text(load_model(&fifo_graph).map(|_| ()), tmp.path()),
            err_text(load_model(&fifo_quant).map(|_| ()), tmp.path()),
            err_text(load_model(&huge_graph).map(|_| ()), tmp.path()),
            err_text(m.variable("fifo").map(|_| ()), tmp.path()),
            err_text(m.variable("big").map(|_| ()), tmp.path()),
            err_text(read_dat_file(&big).map(|_| ()), tmp.path()),
        ];
        expect![[r#"
            <tmp>/model.fifo is a FIFO, not a regular file
            <tmp>/fifo_graph/graph.nnef is a FIFO, not a regular file
            <tmp>/fifo_quant/graph.quant is a FIFO, not a regular file
            <tmp>/huge_graph/graph.nnef is 1073741824 bytes, more than the 268435456 bytes allowed
            variable 'fifo': <tmp>/m/fifo.dat is not a regular file
            <tmp>/m/big.dat: header says 4 items of float32 (16 bytes) but the file has 3221225344 data bytes
            <tmp>/m/big.dat: header says 4 items of float32 (16 bytes) but the file has 3221225344 data bytes"#]].assert_eq(&out.join("\n"));
    }

    #[test]
    fn bare_graph_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("graph.nnef");
        fs::write(&path, GRAPH).unwrap();
        fs::write(tmp.path().join("w.dat"), dat(1.0)).unwrap();
        let m = load_model(&path).unwrap();
        assert_eq!(m.graph.text, GRAPH);
        assert!(m.quant.is_none());
        expect![[r#"no data for variable 'w': the model was given as the bare file <tmp>/graph.nnef; give the folder or archive that holds graph.nnef and the .dat files"#]]
            .assert_eq(&err_text(m.variable("w"), tmp.path()));
    }

    /// `(label, shape)` of every `variable<scalar>(shape = [...], label = '...')` line.
    /// A text scan, not a parser: good enough for the converter-written corpus.
    fn declared_variables(graph: &str) -> Vec<(String, Vec<usize>)> {
        graph
            .lines()
            .filter(|l| l.contains("= variable"))
            .map(|l| {
                let shape_text = l
                    .split("shape = [")
                    .nth(1)
                    .and_then(|s| s.split(']').next())
                    .unwrap();
                let shape = shape_text
                    .split(',')
                    .map(|n| n.trim().parse().unwrap())
                    .collect();
                let label = l
                    .split("label = '")
                    .nth(1)
                    .and_then(|s| s.split('\'').next())
                    .unwrap();
                (label.to_string(), shape)
            })
            .collect()
    }

    #[test]
    fn shared_models_load() {
        // `shared/` sits next to the main checkout; worktrees live one level deeper.
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let models = manifest
            .ancestors()
            .map(|a| a.join("shared/models"))
            .find(|p| p.is_dir());
        let Some(Ok(dirs)) = models.map(fs::read_dir) else {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                (format!("skipped: ../shared not present") + "\n").as_bytes(),
            );
            return;
        };
        let mut seen = Vec::new();
        for d in dirs {
            let dir = d.unwrap().path();
            let model = dir.join("model.nnef");
            if !model.is_dir() {
                continue;
            }
            let m = load_model(&model).unwrap_or_else(|e| panic!("{e}"));
            let vars = declared_variables(&m.graph.text);
            for (label, shape) in &vars {
                let bytes = m.variable(label).unwrap_or_else(|e| panic!("{e}"));
                let t =
                    read_dat(&bytes).unwrap_or_else(|e| panic!("{}: {e}", m.variable_path(label)));
                t.conform(shape, DType::F32)
                    .unwrap_or_else(|e| panic!("{}: {e}", m.variable_path(label)));
            }
            for io in ["input.dat", "expected.dat"] {
                let bytes = fs::read(dir.join(io)).unwrap();
                read_dat(&bytes).unwrap_or_else(|e| panic!("{}: {e}", dir.join(io).display()));
            }
            seen.push(format!(
                "{}: {} variables",
                dir.file_name().unwrap().to_string_lossy(),
                vars.len()
            ));
        }
        seen.sort();
        assert!(seen.len() >= 7, "{seen:?}");
        println!("{}", seen.join("\n"));
    }

    #[test]
    fn stdlib_declares_every_standard_fragment() {
        // Spec §3.11 (primitives: no body) and §4.11 (compounds: with body), 1.0.5.
        let primitives = "external variable constant update
            reshape squeeze unsqueeze transpose split concat slice stack unstack tile pad gather cast
            copy neg rcp exp log sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh abs sign not
            floor ceil round add sub mul div pow lt gt le ge eq ne and or select matmul
            conv deconv box debox argmax_pool sample desample multilinear_upsample
            sum_reduce max_reduce min_reduce argmax_reduce argmin_reduce any_reduce all_reduce
            avg_roi_pool max_roi_pool roi_resample";
        let compounds = "sqr sqrt rsqr rsqrt log2 min max clamp
            relu sigmoid softabs softmax softplus elu selu gelu silu prelu leaky_relu
            mean_reduce moments max_pool_with_index max_pool avg_pool rms_pool
            linear separable_conv separable_deconv nearest_downsample area_downsample nearest_upsample
            local_response_normalization local_mean_normalization local_variance_normalization
            local_contrast_normalization l1_normalization l2_normalization batch_normalization
            avg_roi_align max_roi_align
            min_max_linear_quantize zero_point_linear_quantize linear_quantize logarithmic_quantize
            copy_n add_n";
        let mut sources = crate::diag::SourceMap::new();
        let file = sources.add(STDLIB_NAME, STDLIB_TEXT);
        let lib = crate::front::syntax::parse_library(file, STDLIB_TEXT)
            .unwrap_or_else(|d| panic!("{}", d.render(&sources)));
        let mut declared: HashMap<String, bool> = HashMap::new();
        for f in &lib.fragments {
            assert!(
                declared
                    .insert(f.name.name.clone(), f.body.is_some())
                    .is_none(),
                "{} twice",
                f.name.name
            );
        }
        for (names, body) in [(primitives, false), (compounds, true)] {
            for n in names.split_whitespace() {
                assert_eq!(
                    declared.remove(n),
                    Some(body),
                    "{n}: expected body = {body}"
                );
            }
        }
        assert!(declared.is_empty(), "not in the spec lists: {declared:?}");
    }
}
