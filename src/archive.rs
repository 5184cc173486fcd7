//! A static library (`lib*.a`) writer for [`Build`](crate::Build): the System V / GNU `ar`
//! format with a symbol index, written by hand so a build script needs no `ar` tool.
//!
//! Layout: the magic `!<arch>\n`; then members, each a 60-byte text header (name, mtime,
//! owner, group, mode, size, "`\n") followed by the data padded to an even length. The first
//! member, named `/`, is the symbol index the linker reads to know which member defines
//! what: a big-endian count, one big-endian offset per symbol (of the defining member's
//! header), then the NUL-terminated names. GNU ld refuses an archive without it. Member
//! names longer than 15 bytes are not supported (no `//` long-name table); timestamps
//! and owners are zero so the output is reproducible. Only the GNU variant is written; it
//! is what ELF linkers read (Apple's `ld64` expects the BSD variant and is not served).

use object::{Object, ObjectSymbol};
use std::fmt;

/// Why an archive could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    /// A member's name does not fit the 15 bytes of the short-name field, or contains `/`.
    Name(String),
    /// An object could not be parsed to list its symbols.
    Object {
        /// The member name.
        member: String,
        /// The parser's message.
        message: String,
    },
    /// The archive would exceed the 4 GiB the 32-bit index can address.
    TooLarge,
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveError::Name(n) => {
                write!(
                    f,
                    "archive member name `{n}` must be 1-15 bytes without `/`"
                )
            }
            ArchiveError::Object { member, message } => {
                write!(f, "cannot read the symbols of `{member}`: {message}")
            }
            ArchiveError::TooLarge => f.write_str("archive larger than 4 GiB"),
        }
    }
}

impl std::error::Error for ArchiveError {}

/// The global symbols an object defines (what the archive index must list).
pub fn defined_symbols(member: &str, object: &[u8]) -> Result<Vec<String>, ArchiveError> {
    let file = object::File::parse(object).map_err(|e| ArchiveError::Object {
        member: member.into(),
        message: e.to_string(),
    })?;
    let mut names = Vec::new();
    for sym in file.symbols() {
        if sym.is_global() && sym.is_definition() {
            let name = sym.name().map_err(|e| ArchiveError::Object {
                member: member.into(),
                message: e.to_string(),
            })?;
            names.push(name.to_string());
        }
    }
    Ok(names)
}

fn header(out: &mut Vec<u8>, name: &str, size: usize) {
    // Fields are left-aligned ASCII padded with spaces: name 16, mtime 12, uid 6, gid 6,
    // mode 8, size 10, then the terminator "`\n".
    let h = format!(
        "{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n",
        0, 0, 0, "644"
    );
    out.extend_from_slice(h.as_bytes());
}

/// Writes an archive of `members` (name, object bytes) with a symbol index.
pub fn write(members: &[(&str, &[u8])]) -> Result<Vec<u8>, ArchiveError> {
    let mut symbols: Vec<(usize, String)> = Vec::new();
    for (k, (name, data)) in members.iter().enumerate() {
        if name.is_empty() || name.len() > 15 || name.contains('/') {
            return Err(ArchiveError::Name((*name).to_string()));
        }
        symbols.extend(defined_symbols(name, data)?.into_iter().map(|s| (k, s)));
    }
    let names_len: usize = symbols.iter().map(|(_, s)| s.len() + 1).sum();
    let index_len = 4 + 4 * symbols.len() + names_len;
    let padded = |n: usize| n + n % 2;
    // Offsets of each member's header, given that the index comes first.
    let mut offset = 8 + 60 + padded(index_len);
    let mut member_offsets = Vec::with_capacity(members.len());
    for (_, data) in members {
        member_offsets.push(offset);
        offset += 60 + padded(data.len());
    }
    if u32::try_from(offset).is_err() {
        return Err(ArchiveError::TooLarge);
    }
    let mut out = Vec::with_capacity(offset);
    out.extend_from_slice(b"!<arch>\n");
    header(&mut out, "/", index_len);
    out.extend_from_slice(&(symbols.len() as u32).to_be_bytes());
    for (k, _) in &symbols {
        let off = member_offsets.get(*k).copied().unwrap_or(0);
        out.extend_from_slice(&(off as u32).to_be_bytes());
    }
    for (_, s) in &symbols {
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    }
    if index_len % 2 == 1 {
        out.push(b'\n');
    }
    for (name, data) in members {
        header(&mut out, &format!("{name}/"), data.len());
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_names_and_non_objects() {
        assert_eq!(write(&[("", b"")]), Err(ArchiveError::Name(String::new())));
        assert!(matches!(
            write(&[("a_very_long_name.o", b"")]),
            Err(ArchiveError::Name(_))
        ));
        assert!(matches!(
            write(&[("x.o", b"not an object")]),
            Err(ArchiveError::Object { .. })
        ));
    }

    #[test]
    fn empty_archive_layout() {
        let a = write(&[]).expect("empty archive");
        assert_eq!(&a[..8], b"!<arch>\n");
        assert_eq!(a.len(), 8 + 60 + 4);
        assert_eq!(&a[8..24], b"/               ");
        assert_eq!(&a[66..68], b"`\n");
    }
}
