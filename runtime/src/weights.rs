//! The external weights file of a model compiled with `--weights external`: its format,
//! its checksum, and [`Weights`], an owned 64-byte-aligned copy a Rust caller passes to
//! the model.
//!
//! Format (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `NNEFCWT\0` |
//! | 8..12 | format version ([`WEIGHTS_VERSION`]) |
//! | 12..16 | header size in bytes ([`WEIGHTS_HEADER`] = 64) |
//! | 16..24 | model hash: identifies the model the file was written for |
//! | 24..32 | file size in bytes, header included (a multiple of 64) |
//! | 32..40 | data hash: [`data_hash`] of bytes 64.. of the file |
//! | 40..64 | zero |
//!
//! Every constant sits at a 64-byte-aligned offset from the start of the file, already
//! packed or transformed exactly as the code reads it, so a file mapped or read to a
//! 64-byte-aligned address is used in place. The model hash covers the data hash and the
//! offsets and sizes of every constant, so the weights of another model (or of the same
//! graph compiled to a different layout) are refused in O(1) by every run; the data hash
//! is verified only by the checkers ([`check_weights`], the generated
//! `PREFIX_check_weights`, [`Weights::from_bytes`]), which read the whole file once.
//!
//! Not here: which constants a model has and where they go (the compiler decides and
//! writes the file); the per-run header check (generated code).

use crate::model::ModelInfo;
use crate::status::{Error, Status};

/// The first 8 bytes of a weights file.
pub const WEIGHTS_MAGIC: [u8; 8] = *b"NNEFCWT\0";
/// The format version this runtime reads and nnefc writes.
pub const WEIGHTS_VERSION: u32 = 1;
/// Bytes of the header; the first constant starts here.
pub const WEIGHTS_HEADER: usize = 64;
/// Alignment of the file in memory and of every constant in it.
pub const WEIGHTS_ALIGN: usize = 64;

/// Byte offsets of the header fields.
pub mod field {
    /// Format version (u32).
    pub const VERSION: usize = 8;
    /// Header size (u32).
    pub const HEADER: usize = 12;
    /// Model hash (u64).
    pub const MODEL_HASH: usize = 16;
    /// File size (u64).
    pub const SIZE: usize = 24;
    /// Data hash (u64).
    pub const DATA_HASH: usize = 32;
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The checksum of a file's data: FNV-1a over little-endian 64-bit words (the data is a
/// multiple of 64 bytes; a shorter tail, which no valid file has, is zero-extended).
/// Word-wise so that checking a 100 MB file takes milliseconds; it detects corruption
/// and mix-ups, not tampering.
pub fn data_hash(data: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap_or([0; 8]))).wrapping_mul(FNV_PRIME);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// The model hash of a file with data hash `data` and constants at `(offset, bytes)`.
pub fn model_hash(data: u64, constants: &[(usize, usize)]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut mix = |x: u64| h = (h ^ x).wrapping_mul(FNV_PRIME);
    mix(data);
    mix(constants.len() as u64);
    for &(off, len) in constants {
        mix(off as u64);
        mix(len as u64);
    }
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Checks that `blob` is a complete, uncorrupted weights file, whatever model it is for:
/// the magic, version and header size, the size field against `blob.len()`, and the
/// data hash. Returns the file's model hash.
pub fn check_file(blob: &[u8]) -> Result<u64, Error> {
    let bad = Err(Error::Status(Status::InvalidWeights));
    if blob.len() < WEIGHTS_HEADER
        || blob[..8] != WEIGHTS_MAGIC
        || u32_at(blob, field::VERSION) != WEIGHTS_VERSION
        || u32_at(blob, field::HEADER) as usize != WEIGHTS_HEADER
    {
        return bad;
    }
    let size = u64_at(blob, field::SIZE);
    if size != blob.len() as u64 || !size.is_multiple_of(WEIGHTS_ALIGN as u64) {
        return bad;
    }
    if data_hash(&blob[WEIGHTS_HEADER..]) != u64_at(blob, field::DATA_HASH) {
        return bad;
    }
    Ok(u64_at(blob, field::MODEL_HASH))
}

/// Checks `blob` as the weights of the model `info` describes: [`check_file`], then its
/// model hash, size and data hash against the descriptor, and its address against
/// [`WEIGHTS_ALIGN`]. A model with embedded weights accepts nothing
/// ([`Status::WrongWeights`]).
pub fn check_weights(info: &ModelInfo, blob: &[u8]) -> Result<(), Error> {
    let hash = check_file(blob)?;
    belongs_to(info, hash, blob)?;
    if !(blob.as_ptr() as usize).is_multiple_of(WEIGHTS_ALIGN) {
        return Err(Error::Status(Status::Misaligned));
    }
    Ok(())
}

/// 64 bytes at a 64-byte-aligned address: what [`Weights`] stores.
#[cfg(feature = "std")]
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// Whether a checked file (`blob`, whose header carries `model_hash`) is the one the
/// model `info` describes: `WrongWeights` otherwise, and always for embedded weights.
fn belongs_to(info: &ModelInfo, model_hash: u64, blob: &[u8]) -> Result<(), Error> {
    if info.weights_size == 0
        || model_hash != info.weights_model_hash
        || blob.len() != info.weights_size
        || u64_at(blob, field::DATA_HASH) != info.weights_data_hash
    {
        return Err(Error::Status(Status::WrongWeights));
    }
    Ok(())
}

/// A weights file held in memory at a 64-byte-aligned address, checked once when made.
#[cfg(feature = "std")]
pub struct Weights {
    words: Vec<Line>,
    len: usize,
    model_hash: u64,
}

#[cfg(feature = "std")]
impl Weights {
    /// Copies `blob` to aligned memory after [`check_file`] (which model it belongs to is
    /// checked when it is given to one: [`Weights::check_for`]).
    pub fn from_bytes(blob: &[u8]) -> Result<Weights, Error> {
        let model_hash = check_file(blob)?;
        let mut w = Weights::zeroed(blob.len());
        w.bytes_mut().copy_from_slice(blob);
        w.model_hash = model_hash;
        Ok(w)
    }

    /// `len` zero bytes at an aligned address (model hash not yet known).
    fn zeroed(len: usize) -> Weights {
        Weights {
            words: vec![Line([0; 64]); len.div_ceil(64)],
            len,
            model_hash: 0,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `words` owns at least `len` initialized bytes; u8 has no alignment needs.
        unsafe { core::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    /// Reads and checks a weights file. A file that is not a valid weights file gives an
    /// `InvalidData` error carrying the [`Status`] message.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> std::io::Result<Weights> {
        use std::io::Read;
        let mut f = std::fs::File::open(path.as_ref())?;
        let meta = f.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        // Read the header first so that a huge file that is not a weights file is
        // refused without reading it.
        let mut head = [0u8; WEIGHTS_HEADER];
        f.read_exact(&mut head).map_err(|_| invalid())?;
        let size = u64_at(&head, field::SIZE);
        if head[..8] != WEIGHTS_MAGIC || size != meta.len() {
            return Err(invalid());
        }
        let size = usize::try_from(size).map_err(|_| invalid())?;
        // Read straight into the aligned buffer: one copy of a file that may be 100 MB.
        let mut w = Weights::zeroed(size);
        let bytes = w.bytes_mut();
        bytes[..WEIGHTS_HEADER].copy_from_slice(&head);
        f.read_exact(&mut bytes[WEIGHTS_HEADER..])
            .map_err(|_| invalid())?;
        w.model_hash = check_file(w.as_bytes()).map_err(|_| invalid())?;
        Ok(w)
    }

    /// The whole file, header included, at a 64-byte-aligned address.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `words` owns at least `len` initialized bytes.
        unsafe { core::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    /// The model hash in the file's header.
    pub fn model_hash(&self) -> u64 {
        self.model_hash
    }

    /// Whether these are the weights of the model `info` describes ([`check_weights`]
    /// without reading the data again).
    pub fn check_for(&self, info: &ModelInfo) -> Result<(), Error> {
        belongs_to(info, self.model_hash, self.as_bytes())
    }
}

#[cfg(feature = "std")]
fn invalid() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        Status::InvalidWeights.message(),
    )
}

#[cfg(feature = "std")]
impl core::fmt::Debug for Weights {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Weights")
            .field("len", &self.len)
            .field("model_hash", &format_args!("{:#018x}", self.model_hash))
            .finish()
    }
}

/// Writes a weights file: the header, then each constant at its offset (64-byte
/// aligned, in order), zero-padded to a multiple of 64 bytes. Returns the file and the
/// offset of each constant. Used by the compiler; here so that the format has one home.
#[cfg(feature = "std")]
pub fn write_file(constants: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
    let mut blob = vec![0u8; WEIGHTS_HEADER];
    let mut offsets = Vec::with_capacity(constants.len());
    for c in constants {
        offsets.push(blob.len());
        blob.extend_from_slice(c);
        blob.resize(blob.len().next_multiple_of(WEIGHTS_ALIGN), 0);
    }
    let data = data_hash(&blob[WEIGHTS_HEADER..]);
    let layout: Vec<(usize, usize)> = offsets
        .iter()
        .zip(constants)
        .map(|(&o, c)| (o, c.len()))
        .collect();
    let model = model_hash(data, &layout);
    blob[..8].copy_from_slice(&WEIGHTS_MAGIC);
    blob[field::VERSION..field::VERSION + 4].copy_from_slice(&WEIGHTS_VERSION.to_le_bytes());
    blob[field::HEADER..field::HEADER + 4].copy_from_slice(&(WEIGHTS_HEADER as u32).to_le_bytes());
    blob[field::MODEL_HASH..field::MODEL_HASH + 8].copy_from_slice(&model.to_le_bytes());
    let size = blob.len() as u64;
    blob[field::SIZE..field::SIZE + 8].copy_from_slice(&size.to_le_bytes());
    blob[field::DATA_HASH..field::DATA_HASH + 8].copy_from_slice(&data.to_le_bytes());
    (blob, offsets)
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    fn info_for(blob: &[u8]) -> ModelInfo {
        ModelInfo {
            name: c"m".as_ptr(),
            num_inputs: 0,
            inputs: core::ptr::null(),
            num_outputs: 0,
            outputs: core::ptr::null(),
            workspace_size: 0,
            workspace_align: 64,
            workspace_per_worker: 0,
            weights_size: blob.len(),
            weights_model_hash: u64_at(blob, field::MODEL_HASH),
            weights_data_hash: u64_at(blob, field::DATA_HASH),
        }
    }

    #[test]
    fn written_files_check_and_every_damage_is_refused() {
        let a = [1u8, 2, 3];
        let b = [7u8; 100];
        let (blob, offsets) = write_file(&[&a, &b, &[]]);
        assert_eq!(offsets, vec![64, 128, 256]);
        assert_eq!(blob.len(), 256);
        let w = Weights::from_bytes(&blob).unwrap();
        assert_eq!(w.as_bytes(), &blob[..]);
        assert_eq!(w.as_bytes().as_ptr() as usize % 64, 0);
        let info = info_for(&blob);
        assert_eq!(w.check_for(&info), Ok(()));
        assert_eq!(check_weights(&info, w.as_bytes()), Ok(()));

        let invalid = Err(Error::Status(Status::InvalidWeights));
        // Truncated, extended, bad magic, bad version, a flipped data byte.
        assert_eq!(check_file(&blob[..blob.len() - 64]), invalid);
        assert_eq!(check_file(&blob[..10]), invalid);
        let mut longer = blob.clone();
        longer.extend([0u8; 64]);
        assert_eq!(check_file(&longer), invalid);
        for at in [0, field::VERSION, field::HEADER, 64 + 1, blob.len() - 1] {
            let mut d = blob.clone();
            d[at] ^= 0x10;
            assert_eq!(check_file(&d), invalid, "byte {at}");
            assert!(Weights::from_bytes(&d).is_err());
        }
        // Another model's (valid) file.
        let (other, _) = write_file(&[&a, &b]);
        let wrong = Err(Error::Status(Status::WrongWeights));
        assert_eq!(Weights::from_bytes(&other).unwrap().check_for(&info), wrong);
        assert_eq!(
            check_weights(&info, Weights::from_bytes(&other).unwrap().as_bytes()),
            wrong
        );
        // Same data, other layout: another model hash.
        let (moved, _) = write_file(&[&a, &[], &b]);
        assert_ne!(check_file(&moved), check_file(&blob));
        // A model with embedded weights accepts no file.
        let mut embedded = info;
        embedded.weights_size = 0;
        assert_eq!(w.check_for(&embedded), wrong);
    }

    #[test]
    fn files_are_read_with_their_header_checked_first() {
        let dir = std::env::temp_dir().join(format!("nnefc-weights-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (blob, _) = write_file(&[&[5u8; 70]]);
        let good = dir.join("good.weights");
        std::fs::write(&good, &blob).unwrap();
        assert_eq!(Weights::from_file(&good).unwrap().as_bytes(), &blob[..]);
        let bad = dir.join("bad.weights");
        std::fs::write(&bad, &blob[..blob.len() - 1]).unwrap();
        let e = Weights::from_file(&bad).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            e.to_string().contains("not a valid nnefc weights file"),
            "{e}"
        );
        assert!(Weights::from_file(&dir).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
