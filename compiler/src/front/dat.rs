//! NNEF binary tensor files (`.dat`): reading both header generations and writing the
//! current one.
//!
//! A `.dat` file is a 128-byte little-endian header (magic `4E EF`, version 1.0, data
//! length, rank ≤ 8, eight u32 extents, bits per item, item type) followed by exactly
//! `data length` bytes of row-major items (spec §7.2–§7.5). Two header generations exist
//! and share the layout; they differ only in the word at offset 48:
//!
//! * 1.0.3 and later: an item type (float, unsigned, quantized unsigned, quantized signed,
//!   signed, bool) in the low 16 bits, a vendor id in the high 16 bits.
//! * 1.0.0 – 1.0.2 ("legacy"): a quantization algorithm code (`0x00` float, `0x01`
//!   integer with a signedness flag at offset 52, `0x10` linear and `0x11` logarithmic
//!   quantized codes with `min`/`max` as f32 at offsets 52/56).
//!
//! Codes `0x10`/`0x11` are unambiguous; a code 1 file with a non-zero word at offset 52
//! is a legacy *signed* integer file (the same rule the Khronos readers use). Codes 0
//! and 1 otherwise mean the same in both generations.
//!
//! Decoded values become the compiler's element types ([`ir::Tensor`]): floats and
//! quantized codes as f32 (codes are kept raw, the caller dequantizes with `graph.quant`
//! or the legacy header parameters in [`DatTensor::quant`]), integers as i32 (values
//! outside i32 are an error, not a wrap), bools as bool.
//!
//! Item widths that are a multiple of 8 are stored little-endian, one item after the
//! other. Other widths (1-bit bools, 4-bit codes, …) form a continuous MSB-first bit
//! stream, as the reference `pack_bits` does for 1-bit items; no reference reader pins
//! down widths other than 1, so that choice is ours (spec §7.3 [?]).
//!
//! Not done here: matching a file against its `variable` declaration beyond
//! [`DatTensor::conform`], dequantization with `graph.quant` parameters (sema's job),
//! vendor-defined item types (rejected with an error).

use crate::ir::{DType, Tensor, TensorData};
use std::fmt;

/// Size of the fixed header.
pub const HEADER_LEN: usize = 128;
/// Largest rank a header can describe (eight extent fields).
pub const MAX_RANK: usize = 8;
const MAGIC: [u8; 2] = [0x4E, 0xEF];

/// What kind of numbers the items are (spec §7.3 codes 0–5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemKind {
    /// IEEE 754, 16/32/64 bits.
    Float,
    /// Unsigned integer, 1–64 bits.
    Unsigned,
    /// Unsigned integer codes of a quantized real tensor, 1–64 bits.
    QuantizedUnsigned,
    /// Two's-complement integer codes of a quantized real tensor, 1–64 bits.
    QuantizedSigned,
    /// Two's-complement integer, 1–64 bits.
    Signed,
    /// Logical, 1 bit (packed) or 8 bits (non-zero = true).
    Bool,
}

impl ItemKind {
    /// The 1.0.3+ Khronos code of this kind.
    pub fn code(self) -> u32 {
        match self {
            ItemKind::Float => 0,
            ItemKind::Unsigned => 1,
            ItemKind::QuantizedUnsigned => 2,
            ItemKind::QuantizedSigned => 3,
            ItemKind::Signed => 4,
            ItemKind::Bool => 5,
        }
    }

    fn from_code(code: u32) -> Option<ItemKind> {
        Some(match code {
            0 => ItemKind::Float,
            1 => ItemKind::Unsigned,
            2 => ItemKind::QuantizedUnsigned,
            3 => ItemKind::QuantizedSigned,
            4 => ItemKind::Signed,
            5 => ItemKind::Bool,
            _ => return None,
        })
    }

    /// Whether `bits` is a legal width for this kind (spec §7.3 table).
    pub fn allows_bits(self, bits: u32) -> bool {
        match self {
            ItemKind::Float => matches!(bits, 16 | 32 | 64),
            ItemKind::Bool => matches!(bits, 1 | 8),
            _ => (1..=64).contains(&bits),
        }
    }

    fn allowed_bits_text(self) -> &'static str {
        match self {
            ItemKind::Float => "16, 32 or 64",
            ItemKind::Bool => "1 or 8",
            _ => "1 to 64",
        }
    }

    /// The NNEF data type a tensor of these items has (`scalar` → f32, `integer` → i32,
    /// `logical` → bool).
    pub fn dtype(self) -> DType {
        match self {
            ItemKind::Float | ItemKind::QuantizedUnsigned | ItemKind::QuantizedSigned => DType::F32,
            ItemKind::Unsigned | ItemKind::Signed => DType::I32,
            ItemKind::Bool => DType::Bool,
        }
    }

    pub fn is_quantized(self) -> bool {
        matches!(
            self,
            ItemKind::QuantizedUnsigned | ItemKind::QuantizedSigned
        )
    }

    fn is_signed_int(self) -> bool {
        matches!(self, ItemKind::Signed | ItemKind::QuantizedSigned)
    }
}

impl fmt::Display for ItemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ItemKind::Float => "float",
            ItemKind::Unsigned => "unsigned integer",
            ItemKind::QuantizedUnsigned => "quantized unsigned integer",
            ItemKind::QuantizedSigned => "quantized signed integer",
            ItemKind::Signed => "signed integer",
            ItemKind::Bool => "bool",
        })
    }
}

/// Item kind plus width, e.g. float32 or 4-bit quantized signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ItemType {
    pub kind: ItemKind,
    pub bits: u32,
}

impl ItemType {
    pub const F32: ItemType = ItemType {
        kind: ItemKind::Float,
        bits: 32,
    };

    pub fn new(kind: ItemKind, bits: u32) -> ItemType {
        ItemType { kind, bits }
    }
}

impl fmt::Display for ItemType {
    /// `float32`, `uint8`, `int64`, `quantized uint8`, `quantized int4`, `bool`
    /// (8-bit) or `bit-packed bool`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits;
        match self.kind {
            ItemKind::Float => write!(f, "float{b}"),
            ItemKind::Unsigned => write!(f, "uint{b}"),
            ItemKind::Signed => write!(f, "int{b}"),
            ItemKind::QuantizedUnsigned => write!(f, "quantized uint{b}"),
            ItemKind::QuantizedSigned => write!(f, "quantized int{b}"),
            ItemKind::Bool if b == 1 => f.write_str("bit-packed bool"),
            ItemKind::Bool => write!(f, "bool{b}"),
        }
    }
}

/// Where the meaning of quantized codes comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QuantParams {
    /// 1.0.3+ header: the tensor's entry in `graph.quant` says how to dequantize.
    GraphQuant,
    /// Legacy code `0x10`: `linear_quantize` with these bounds (unsigned codes).
    LegacyLinear { min: f32, max: f32 },
    /// Legacy code `0x11`: `logarithmic_quantize`; the header stores both bounds, the
    /// algorithm uses `max`.
    LegacyLogarithmic { min: f32, max: f32 },
}

/// A decoded `.dat` file.
#[derive(Clone, Debug, PartialEq)]
pub struct DatTensor {
    pub shape: Vec<usize>,
    /// The item type as stored (legacy codes are mapped onto the 1.0.3+ kinds).
    pub item: ItemType,
    /// The values in the compiler's element type (quantized: raw codes as f32).
    pub data: Tensor,
    /// `Some` exactly when `item` is quantized.
    pub quant: Option<QuantParams>,
}

/// Everything that can be wrong with a `.dat` file or a tensor to be written as one.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DatError {
    #[error("file is {len} bytes long, shorter than the 128-byte .dat header")]
    TooShort { len: usize },
    #[error("not an NNEF .dat file: magic bytes are {0:02x} {1:02x}, expected 4e ef")]
    BadMagic(u8, u8),
    #[error("unsupported .dat version {major}.{minor} (only 1.0 is defined)")]
    BadVersion { major: u8, minor: u8 },
    #[error("header says rank {0}, but a .dat file holds at most rank 8")]
    RankTooLarge(u64),
    #[error(
        "unknown item type code {code} (1.0.3+ codes are 0-5; legacy quantization codes 0x10, 0x11)"
    )]
    UnknownItemType { code: u32 },
    #[error("vendor-defined item type (vendor {vendor:#06x}, code {code}) is not supported")]
    VendorItemType { vendor: u32, code: u32 },
    #[error("{kind} items cannot be {bits} bits wide (allowed: {allowed})")]
    BadBits {
        kind: ItemKind,
        bits: u32,
        allowed: &'static str,
    },
    #[error(
        "quantized codes of {bits} bits are not supported: float32 holds integer codes exactly only up to 24 bits"
    )]
    QuantTooWide { bits: u32 },
    #[error("tensor of shape {shape:?} with {bits}-bit items is too large to address")]
    TooLarge { shape: Vec<u64>, bits: u32 },
    #[error("header says {header} data bytes, but {volume} items of {item} take {needed} bytes")]
    LengthMismatch {
        header: u64,
        volume: u64,
        item: ItemType,
        needed: u64,
    },
    #[error(
        "header says {volume} items of {item} ({needed} bytes) but the file has {actual} data bytes{hint}"
    )]
    FileSize {
        volume: u64,
        item: ItemType,
        needed: u64,
        actual: usize,
        hint: &'static str,
    },
    #[error("item {index} is {value}, outside the range of a 32-bit integer")]
    IntRange { index: usize, value: i128 },
    #[error("item {index} is {value:e}, outside the range of float32")]
    FloatRange { index: usize, value: f64 },
    #[error(
        "the file holds a tensor of shape {file:?}, but the variable is declared with shape {declared:?}"
    )]
    ShapeMismatch {
        file: Vec<usize>,
        declared: Vec<usize>,
    },
    #[error("the file holds {item} items ({file}), but the variable is declared {declared}")]
    TypeMismatch {
        item: ItemType,
        file: &'static str,
        declared: &'static str,
    },
    #[error("cannot write: shape has rank {0}, a .dat file holds at most rank 8")]
    WriteRank(usize),
    #[error("cannot write: extent {0} does not fit the 32-bit header field")]
    WriteExtent(usize),
    #[error("cannot write: shape {shape:?} has {volume} items but {len} values were given")]
    WriteCount {
        shape: Vec<usize>,
        volume: usize,
        len: usize,
    },
    #[error("cannot write {dtype} values as {item} items")]
    WriteType { dtype: DType, item: ItemType },
    #[error("cannot write: value {value} at index {index} is not representable as {item}")]
    WriteValue {
        index: usize,
        value: String,
        item: ItemType,
    },
}

/// NNEF name of a data type, for messages.
fn nnef_type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "scalar",
        DType::I32 => "integer",
        DType::Bool => "logical",
    }
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    // Callers pass offsets inside the 128-byte header, checked before any field is read.
    let mut word = [0u8; 4];
    if let Some(s) = bytes.get(offset..offset + 4) {
        word.copy_from_slice(s);
    }
    u32::from_le_bytes(word)
}

/// The fields of a header after validation.
struct Header {
    shape: Vec<usize>,
    item: ItemType,
    quant: Option<QuantParams>,
    volume: usize,
}

fn parse_header(bytes: &[u8]) -> Result<Header, DatError> {
    if bytes.len() < HEADER_LEN {
        return Err(DatError::TooShort { len: bytes.len() });
    }
    parse_header_for(bytes, (bytes.len() - HEADER_LEN) as u64)
}

/// Validates a file's header (its first [`HEADER_LEN`] bytes, or fewer for a short
/// file) against the file's total length, without its data: a reader checks this
/// before reading or allocating anything the header asks for.
pub fn check_header(header: &[u8], file_len: u64) -> Result<(), DatError> {
    let short = || DatError::TooShort {
        len: usize::try_from(file_len).unwrap_or(usize::MAX),
    };
    if header.len() < HEADER_LEN || file_len < HEADER_LEN as u64 {
        return Err(short());
    }
    parse_header_for(&header[..HEADER_LEN], file_len - HEADER_LEN as u64).map(|_| ())
}

/// The header in `bytes[..HEADER_LEN]`, checked against `data_len` data bytes.
fn parse_header_for(bytes: &[u8], data_len_actual: u64) -> Result<Header, DatError> {
    let (m0, m1) = (bytes[0], bytes[1]);
    if [m0, m1] != MAGIC {
        return Err(DatError::BadMagic(m0, m1));
    }
    let (major, minor) = (bytes[2], bytes[3]);
    if (major, minor) != (1, 0) {
        return Err(DatError::BadVersion { major, minor });
    }
    let data_len = u64::from(u32_at(bytes, 4));
    let rank = u32_at(bytes, 8);
    if rank as usize > MAX_RANK {
        return Err(DatError::RankTooLarge(rank.into()));
    }
    // Unused extent fields (index ≥ rank) should be zero; the reference readers do not
    // check them and neither do we, so files from lenient writers still load.
    let extents: Vec<u64> = (0..rank as usize)
        .map(|i| u64::from(u32_at(bytes, 12 + 4 * i)))
        .collect();
    let bits = u32_at(bytes, 44);
    let code_word = u32_at(bytes, 48);
    let reserved0 = u32_at(bytes, 52);

    let vendor = code_word >> 16;
    let code = code_word & 0xFFFF;
    let (item, quant) = if vendor != 0 {
        return Err(DatError::VendorItemType { vendor, code });
    } else if code == 0x10 || code == 0x11 {
        // Legacy quantized codes are unsigned integers with min/max in the header.
        let min = f32::from_bits(reserved0);
        let max = f32::from_bits(u32_at(bytes, 56));
        let params = if code == 0x10 {
            QuantParams::LegacyLinear { min, max }
        } else {
            QuantParams::LegacyLogarithmic { min, max }
        };
        (
            ItemType::new(ItemKind::QuantizedUnsigned, bits),
            Some(params),
        )
    } else {
        let mut kind = ItemKind::from_code(code).ok_or(DatError::UnknownItemType { code })?;
        if kind == ItemKind::Unsigned && reserved0 != 0 {
            // Legacy "integer" with a non-zero signedness flag (an f32 at offset 52).
            kind = ItemKind::Signed;
        }
        let quant = kind.is_quantized().then_some(QuantParams::GraphQuant);
        (ItemType::new(kind, bits), quant)
    };
    if !item.kind.allows_bits(bits) {
        return Err(DatError::BadBits {
            kind: item.kind,
            bits,
            allowed: item.kind.allowed_bits_text(),
        });
    }
    if item.kind.is_quantized() && bits > 24 {
        return Err(DatError::QuantTooWide { bits });
    }

    // Sizes in u64 with overflow checks: eight u32 extents can overflow even u64.
    let too_large = || DatError::TooLarge {
        shape: extents.clone(),
        bits,
    };
    let volume = extents
        .iter()
        .try_fold(1u64, |acc, &e| acc.checked_mul(e))
        .ok_or_else(too_large)?;
    let needed_bits = volume.checked_mul(u64::from(bits)).ok_or_else(too_large)?;
    let needed = needed_bits.div_ceil(8);
    if needed != data_len {
        return Err(DatError::LengthMismatch {
            header: data_len,
            volume,
            item,
            needed,
        });
    }
    if data_len_actual != needed {
        let actual = usize::try_from(data_len_actual).unwrap_or(usize::MAX);
        let hint = if data_len_actual == needed + 4 {
            " (4 bytes too many: possibly written by an early NNEF Python writer with a 132-byte header)"
        } else {
            ""
        };
        return Err(DatError::FileSize {
            volume,
            item,
            needed,
            actual,
            hint,
        });
    }
    // From here on `volume * bits / 8` equals the data length actually present, so every
    // allocation below is bounded by the file size (at most 8 items per byte).
    let volume = usize::try_from(volume).map_err(|_| too_large())?;
    let shape = extents
        .iter()
        .map(|&e| usize::try_from(e).map_err(|_| too_large()))
        .collect::<Result<_, _>>()?;
    Ok(Header {
        shape,
        item,
        quant,
        volume,
    })
}

/// Reads a `.dat` file from its bytes. Validates everything in spec §7.5 that does not
/// need the graph (items 1–6); see [`DatTensor::conform`] for the rest.
pub fn read_dat(bytes: &[u8]) -> Result<DatTensor, DatError> {
    let header = parse_header(bytes)?;
    let data = &bytes[HEADER_LEN..];
    let Header {
        shape,
        item,
        quant,
        volume,
    } = header;
    let values = match item.kind {
        ItemKind::Float => TensorData::F32(decode_floats(data, volume, item.bits)?),
        ItemKind::QuantizedUnsigned | ItemKind::QuantizedSigned => {
            // ≤ 24-bit codes (checked in the header), so the f32 conversion is exact.
            let signed = item.kind.is_signed_int();
            TensorData::F32(
                raw_items(data, volume, item.bits)
                    .map(|r| to_i64(r, item.bits, signed) as f32)
                    .collect(),
            )
        }
        ItemKind::Unsigned | ItemKind::Signed => {
            let signed = item.kind.is_signed_int();
            let mut out = Vec::with_capacity(volume);
            for (index, r) in raw_items(data, volume, item.bits).enumerate() {
                let value: i128 = if signed {
                    to_i64(r, item.bits, true).into()
                } else {
                    r.into()
                };
                let v = i32::try_from(value).map_err(|_| DatError::IntRange { index, value })?;
                out.push(v);
            }
            TensorData::I32(out)
        }
        ItemKind::Bool => {
            TensorData::Bool(raw_items(data, volume, item.bits).map(|r| r != 0).collect())
        }
    };
    Ok(DatTensor {
        data: Tensor {
            shape: shape.clone(),
            data: values,
        },
        shape,
        item,
        quant,
    })
}

fn decode_floats(data: &[u8], volume: usize, bits: u32) -> Result<Vec<f32>, DatError> {
    Ok(match bits {
        16 => data
            .chunks_exact(2)
            .take(volume)
            .map(|c| f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        32 => data
            .chunks_exact(4)
            .take(volume)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        _ => {
            let mut out = Vec::with_capacity(volume);
            for (index, c) in data.chunks_exact(8).take(volume).enumerate() {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                let value = f64::from_le_bytes(w);
                let narrowed = value as f32;
                // Rounding to f32 is expected; turning a finite value into infinity is not.
                if value.is_finite() && !narrowed.is_finite() {
                    return Err(DatError::FloatRange { index, value });
                }
                out.push(narrowed);
            }
            out
        }
    })
}

/// The `volume` raw items of `bits` bits each, as unsigned integers.
fn raw_items(data: &[u8], volume: usize, bits: u32) -> impl Iterator<Item = u64> + '_ {
    let bytes_per = (bits / 8) as usize;
    let byte_aligned = bits.is_multiple_of(8);
    (0..volume).map(move |i| {
        if byte_aligned {
            let start = i * bytes_per;
            let mut w = [0u8; 8];
            if let Some(src) = data.get(start..start + bytes_per) {
                w[..bytes_per].copy_from_slice(src);
            }
            u64::from_le_bytes(w)
        } else {
            // MSB-first continuous bit stream.
            let first = i * bits as usize;
            (first..first + bits as usize).fold(0u64, |acc, p| {
                let byte = data.get(p / 8).copied().unwrap_or(0);
                (acc << 1) | u64::from((byte >> (7 - p % 8)) & 1)
            })
        }
    })
}

/// Interprets the low `bits` bits of `raw` as unsigned or two's complement.
fn to_i64(raw: u64, bits: u32, signed: bool) -> i64 {
    if signed && bits < 64 {
        let shift = 64 - bits;
        ((raw << shift) as i64) >> shift
    } else {
        raw as i64
    }
}

/// IEEE binary16 → binary32 (exact).
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = u32::from((h >> 10) & 0x1F);
    let mant = u32::from(h & 0x3FF);
    match exp {
        0 => sign * (mant as f32) * f32::powi(2.0, -24),
        31 => f32::from_bits((u32::from(h & 0x8000) << 16) | 0x7F80_0000 | (mant << 13)),
        _ => f32::from_bits((u32::from(h & 0x8000) << 16) | ((exp + 112) << 23) | (mant << 13)),
    }
}

/// IEEE binary32 → binary16, rounding to nearest even; overflow gives infinity.
pub fn f32_to_f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xFF) as i32;
    let mant = b & 0x7F_FFFF;
    if exp == 0xFF {
        return sign | 0x7C00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7C00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let halfway = 1 << (shift - 1);
        let rounded = if rem > halfway || (rem == halfway && half & 1 == 1) {
            half + 1
        } else {
            half
        };
        return sign | rounded as u16;
    }
    let mut out = ((e as u32) << 10) | (mant >> 13);
    let rem = mant & 0x1FFF;
    if rem > 0x1000 || (rem == 0x1000 && out & 1 == 1) {
        out += 1; // a carry into the exponent correctly rounds up to the next binade or inf
    }
    sign | out as u16
}

impl DatTensor {
    /// Checks the file against its `variable` declaration (spec §7.5 items 7–8): equal
    /// shape, and an item type that maps to the declared data type. A 1-bit unsigned
    /// file is accepted for `logical` (that is how 1.0.0–1.0.2 wrote bools) and its
    /// data is converted to bool.
    pub fn conform(
        mut self,
        declared_shape: &[usize],
        declared: DType,
    ) -> Result<DatTensor, DatError> {
        if self.shape != declared_shape {
            return Err(DatError::ShapeMismatch {
                file: self.shape,
                declared: declared_shape.to_vec(),
            });
        }
        if declared == DType::Bool && self.item == ItemType::new(ItemKind::Unsigned, 1) {
            if let TensorData::I32(v) = &self.data.data {
                self.data.data = TensorData::Bool(v.iter().map(|&x| x != 0).collect());
            }
            return Ok(self);
        }
        if self.item.kind.dtype() != declared {
            return Err(DatError::TypeMismatch {
                item: self.item,
                file: nnef_type_name(self.item.kind.dtype()),
                declared: nnef_type_name(declared),
            });
        }
        Ok(self)
    }
}

/// Writes a float32 `.dat` file (1.0.3+ header), as `nnefc run` does for outputs.
pub fn write_dat_f32(shape: &[usize], data: &[f32]) -> Result<Vec<u8>, DatError> {
    write_dat(
        &Tensor {
            shape: shape.to_vec(),
            data: TensorData::F32(data.to_vec()),
        },
        ItemType::F32,
    )
}

/// Writes `tensor` with items of type `item` (1.0.3+ header). f32 data can be written as
/// float items or, when every value is an integer in range, as quantized codes; i32
/// data as signed or unsigned integers; bool data as bools. Values that do not fit the
/// item type are an error, never truncated.
pub fn write_dat(tensor: &Tensor, item: ItemType) -> Result<Vec<u8>, DatError> {
    let shape = &tensor.shape;
    if shape.len() > MAX_RANK {
        return Err(DatError::WriteRank(shape.len()));
    }
    if let Some(&e) = shape.iter().find(|&&e| u32::try_from(e).is_err()) {
        return Err(DatError::WriteExtent(e));
    }
    if !item.kind.allows_bits(item.bits) {
        return Err(DatError::BadBits {
            kind: item.kind,
            bits: item.bits,
            allowed: item.kind.allowed_bits_text(),
        });
    }
    let too_large = || DatError::TooLarge {
        shape: shape.iter().map(|&e| e as u64).collect(),
        bits: item.bits,
    };
    let volume = shape
        .iter()
        .try_fold(1usize, |acc, &e| acc.checked_mul(e))
        .ok_or_else(too_large)?;
    if tensor.len() != volume {
        return Err(DatError::WriteCount {
            shape: shape.clone(),
            volume,
            len: tensor.len(),
        });
    }
    let data_len = (volume as u64)
        .checked_mul(u64::from(item.bits))
        .ok_or_else(too_large)?
        .div_ceil(8);
    let data_len32 = u32::try_from(data_len).map_err(|_| too_large())?;

    let raw = raw_values(tensor, item)?;
    let mut out = Vec::with_capacity(HEADER_LEN + data_len as usize);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&data_len32.to_le_bytes());
    out.extend_from_slice(&(shape.len() as u32).to_le_bytes());
    for i in 0..MAX_RANK {
        let e = shape.get(i).copied().unwrap_or(0) as u32;
        out.extend_from_slice(&e.to_le_bytes());
    }
    out.extend_from_slice(&item.bits.to_le_bytes());
    out.extend_from_slice(&item.kind.code().to_le_bytes());
    out.resize(HEADER_LEN, 0);
    pack_items(&mut out, &raw, item.bits);
    Ok(out)
}

/// The raw `bits`-wide bit patterns of every value, checked to fit.
fn raw_values(tensor: &Tensor, item: ItemType) -> Result<Vec<u64>, DatError> {
    let bad_type = || DatError::WriteType {
        dtype: tensor.dtype(),
        item,
    };
    let bad_value = |index: usize, value: String| DatError::WriteValue { index, value, item };
    let bits = item.bits;
    // Range of the integer kinds as i128 so that 64-bit bounds need no special cases.
    let (lo, hi): (i128, i128) = if item.kind.is_signed_int() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    let mask: u64 = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    match (&tensor.data, item.kind) {
        (TensorData::F32(v), ItemKind::Float) => v
            .iter()
            .enumerate()
            .map(|(i, &x)| match bits {
                16 => {
                    let h = f32_to_f16_bits(x);
                    if x.is_finite() && !f16_bits_to_f32(h).is_finite() {
                        Err(bad_value(i, x.to_string()))
                    } else {
                        Ok(u64::from(h))
                    }
                }
                32 => Ok(u64::from(x.to_bits())),
                _ => Ok(f64::from(x).to_bits()),
            })
            .collect(),
        (TensorData::F32(v), ItemKind::QuantizedSigned | ItemKind::QuantizedUnsigned) => v
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                if x.fract() != 0.0
                    || !x.is_finite()
                    || !(lo as f64..=hi as f64).contains(&f64::from(x))
                {
                    return Err(bad_value(i, x.to_string()));
                }
                Ok((x as i64 as u64) & mask)
            })
            .collect(),
        (TensorData::I32(v), ItemKind::Signed | ItemKind::Unsigned) => v
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                if !(lo..=hi).contains(&i128::from(x)) {
                    return Err(bad_value(i, x.to_string()));
                }
                Ok((i64::from(x) as u64) & mask)
            })
            .collect(),
        (TensorData::Bool(v), ItemKind::Bool) => Ok(v.iter().map(|&b| u64::from(b)).collect()),
        _ => Err(bad_type()),
    }
}

/// Appends items: little-endian when byte-aligned, else an MSB-first bit stream.
fn pack_items(out: &mut Vec<u8>, raw: &[u64], bits: u32) {
    if bits.is_multiple_of(8) {
        let n = (bits / 8) as usize;
        for r in raw {
            out.extend_from_slice(&r.to_le_bytes()[..n]);
        }
        return;
    }
    let start = out.len();
    let total_bits = raw.len() * bits as usize;
    out.resize(start + total_bits.div_ceil(8), 0);
    let mut p = 0usize;
    for &r in raw {
        for k in (0..bits).rev() {
            if (r >> k) & 1 == 1
                && let Some(byte) = out.get_mut(start + p / 8)
            {
                *byte |= 0x80 >> (p % 8);
            }
            p += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{Expect, expect};
    use proptest::prelude::*;

    /// A hand-made header: the fields tests want to vary, the rest zero.
    fn header(data_len: u32, shape: &[u32], bits: u32, code: u32, reserved: [u32; 2]) -> Vec<u8> {
        let mut h = vec![0x4E, 0xEF, 1, 0];
        h.extend_from_slice(&data_len.to_le_bytes());
        h.extend_from_slice(&(shape.len() as u32).to_le_bytes());
        for i in 0..8 {
            h.extend_from_slice(&shape.get(i).copied().unwrap_or(0).to_le_bytes());
        }
        h.extend_from_slice(&bits.to_le_bytes());
        h.extend_from_slice(&code.to_le_bytes());
        h.extend_from_slice(&reserved[0].to_le_bytes());
        h.extend_from_slice(&reserved[1].to_le_bytes());
        h.resize(HEADER_LEN, 0);
        h
    }

    fn file(shape: &[u32], bits: u32, code: u32, reserved: [u32; 2], data: &[u8]) -> Vec<u8> {
        let mut f = header(data.len() as u32, shape, bits, code, reserved);
        f.extend_from_slice(data);
        f
    }

    /// One line per decoded file: item type, shape, quantization, values.
    fn show(r: Result<DatTensor, DatError>) -> String {
        match r {
            Ok(t) => {
                let values = match &t.data.data {
                    TensorData::F32(v) => format!("{v:?}"),
                    TensorData::I32(v) => format!("{v:?}"),
                    TensorData::Bool(v) => format!("{v:?}"),
                };
                let q = t.quant.map(|q| format!(" {q:?}")).unwrap_or_default();
                format!("{} {:?}{q} {values}", t.item, t.shape)
            }
            Err(e) => format!("error: {e}"),
        }
    }

    fn check(cases: &[(&str, Vec<u8>)], expected: Expect) {
        let out: String = cases
            .iter()
            .map(|(name, bytes)| format!("{name}: {}\n", show(read_dat(bytes))))
            .collect();
        expected.assert_eq(&out);
    }

    #[test]
    fn write_f32_layout() {
        let bytes = write_dat_f32(&[2, 1], &[1.0, -2.5]).unwrap();
        assert_eq!(bytes.len(), HEADER_LEN + 8);
        let hex: Vec<String> = bytes[..52]
            .chunks(4)
            .map(|c| c.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        expect![[r#"4eef0100 08000000 02000000 02000000 01000000 00000000 00000000 00000000 00000000 00000000 00000000 20000000 00000000"#]]
            .assert_eq(&hex.join(" "));
        assert!(bytes[52..HEADER_LEN].iter().all(|&b| b == 0));
        check(
            &[("f32", bytes)],
            expect![[r#"
            f32: float32 [2, 1] [1.0, -2.5]
        "#]],
        );
    }

    #[test]
    fn round_trip_every_item_type() {
        let floats = Tensor::f32(
            vec![2, 3],
            vec![0.0, -1.5, 3.25, 65504.0, -0.000061035156, 1e-7],
        );
        let mut out = String::new();
        let mut case = |t: &Tensor, item: ItemType| {
            let bytes = write_dat(t, item).unwrap_or_else(|e| panic!("{item}: {e}"));
            let back = read_dat(&bytes).unwrap_or_else(|e| panic!("{item}: {e}"));
            out.push_str(&format!(
                "{:<18} {:>3} bytes  {}\n",
                item.to_string(),
                bytes.len() - HEADER_LEN,
                show(Ok(back.clone()))
            ));
            back
        };
        for bits in [16, 32, 64] {
            let back = case(&floats, ItemType::new(ItemKind::Float, bits));
            if bits > 16 {
                assert_eq!(back.data, floats);
            }
        }
        for bits in [1, 2, 3, 4, 7, 8, 12, 16, 31, 32, 33, 63, 64] {
            let hi = if bits >= 32 {
                i32::MAX
            } else {
                ((1i64 << bits) - 1) as i32
            };
            let t = Tensor::i32(vec![4], vec![0, 1, hi / 2, hi]);
            assert_eq!(case(&t, ItemType::new(ItemKind::Unsigned, bits)).data, t);
            let (lo, hi) = if bits >= 32 {
                (i32::MIN, i32::MAX)
            } else {
                (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1)
            };
            let t = Tensor::i32(vec![4], vec![lo, -1i32.max(lo), 0, hi]);
            assert_eq!(case(&t, ItemType::new(ItemKind::Signed, bits)).data, t);
        }
        for bits in [1, 4, 8, 16, 24] {
            let hi = ((1i64 << bits) - 1) as f32;
            let t = Tensor::f32(vec![3], vec![0.0, 1.0, hi]);
            assert_eq!(
                case(&t, ItemType::new(ItemKind::QuantizedUnsigned, bits)).data,
                t
            );
            let lo = -((1i64 << (bits - 1)) as f32);
            let t = Tensor::f32(vec![3], vec![lo, 0.0, -lo - 1.0]);
            assert_eq!(
                case(&t, ItemType::new(ItemKind::QuantizedSigned, bits)).data,
                t
            );
        }
        let bools = Tensor::bool(
            vec![3, 3],
            vec![true, false, true, true, true, false, false, false, true],
        );
        for bits in [1, 8] {
            assert_eq!(
                case(&bools, ItemType::new(ItemKind::Bool, bits)).data,
                bools
            );
        }
        let scalar = Tensor::f32(vec![], vec![42.0]);
        assert_eq!(case(&scalar, ItemType::F32).data, scalar);
        expect![[r#"
            float16             12 bytes  float16 [2, 3] [0.0, -1.5, 3.25, 65504.0, -6.1035156e-5, 1.1920929e-7]
            float32             24 bytes  float32 [2, 3] [0.0, -1.5, 3.25, 65504.0, -6.1035156e-5, 1e-7]
            float64             48 bytes  float64 [2, 3] [0.0, -1.5, 3.25, 65504.0, -6.1035156e-5, 1e-7]
            uint1                1 bytes  uint1 [4] [0, 1, 0, 1]
            int1                 1 bytes  int1 [4] [-1, -1, 0, 0]
            uint2                1 bytes  uint2 [4] [0, 1, 1, 3]
            int2                 1 bytes  int2 [4] [-2, -1, 0, 1]
            uint3                2 bytes  uint3 [4] [0, 1, 3, 7]
            int3                 2 bytes  int3 [4] [-4, -1, 0, 3]
            uint4                2 bytes  uint4 [4] [0, 1, 7, 15]
            int4                 2 bytes  int4 [4] [-8, -1, 0, 7]
            uint7                4 bytes  uint7 [4] [0, 1, 63, 127]
            int7                 4 bytes  int7 [4] [-64, -1, 0, 63]
            uint8                4 bytes  uint8 [4] [0, 1, 127, 255]
            int8                 4 bytes  int8 [4] [-128, -1, 0, 127]
            uint12               6 bytes  uint12 [4] [0, 1, 2047, 4095]
            int12                6 bytes  int12 [4] [-2048, -1, 0, 2047]
            uint16               8 bytes  uint16 [4] [0, 1, 32767, 65535]
            int16                8 bytes  int16 [4] [-32768, -1, 0, 32767]
            uint31              16 bytes  uint31 [4] [0, 1, 1073741823, 2147483647]
            int31               16 bytes  int31 [4] [-1073741824, -1, 0, 1073741823]
            uint32              16 bytes  uint32 [4] [0, 1, 1073741823, 2147483647]
            int32               16 bytes  int32 [4] [-2147483648, -1, 0, 2147483647]
            uint33              17 bytes  uint33 [4] [0, 1, 1073741823, 2147483647]
            int33               17 bytes  int33 [4] [-2147483648, -1, 0, 2147483647]
            uint63              32 bytes  uint63 [4] [0, 1, 1073741823, 2147483647]
            int63               32 bytes  int63 [4] [-2147483648, -1, 0, 2147483647]
            uint64              32 bytes  uint64 [4] [0, 1, 1073741823, 2147483647]
            int64               32 bytes  int64 [4] [-2147483648, -1, 0, 2147483647]
            quantized uint1      1 bytes  quantized uint1 [3] GraphQuant [0.0, 1.0, 1.0]
            quantized int1       1 bytes  quantized int1 [3] GraphQuant [-1.0, 0.0, 0.0]
            quantized uint4      2 bytes  quantized uint4 [3] GraphQuant [0.0, 1.0, 15.0]
            quantized int4       2 bytes  quantized int4 [3] GraphQuant [-8.0, 0.0, 7.0]
            quantized uint8      3 bytes  quantized uint8 [3] GraphQuant [0.0, 1.0, 255.0]
            quantized int8       3 bytes  quantized int8 [3] GraphQuant [-128.0, 0.0, 127.0]
            quantized uint16     6 bytes  quantized uint16 [3] GraphQuant [0.0, 1.0, 65535.0]
            quantized int16      6 bytes  quantized int16 [3] GraphQuant [-32768.0, 0.0, 32767.0]
            quantized uint24     9 bytes  quantized uint24 [3] GraphQuant [0.0, 1.0, 16777215.0]
            quantized int24      9 bytes  quantized int24 [3] GraphQuant [-8388608.0, 0.0, 8388607.0]
            bit-packed bool      2 bytes  bit-packed bool [3, 3] [true, false, true, true, true, false, false, false, true]
            bool8                9 bytes  bool8 [3, 3] [true, false, true, true, true, false, false, false, true]
            float32              4 bytes  float32 [] [42.0]
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn bit_packing_is_msb_first() {
        let t = Tensor::bool(
            vec![10],
            vec![
                true, false, false, false, false, false, false, true, true, true,
            ],
        );
        let bytes = write_dat(&t, ItemType::new(ItemKind::Bool, 1)).unwrap();
        assert_eq!(&bytes[HEADER_LEN..], &[0b1000_0001, 0b1100_0000]);
        let t = Tensor::i32(vec![3], vec![0xA, 0x5, 0xF]);
        let bytes = write_dat(&t, ItemType::new(ItemKind::Unsigned, 4)).unwrap();
        assert_eq!(&bytes[HEADER_LEN..], &[0xA5, 0xF0]);
        let t = Tensor::i32(vec![2], vec![0x1234, -2]);
        let bytes = write_dat(&t, ItemType::new(ItemKind::Signed, 16)).unwrap();
        assert_eq!(
            &bytes[HEADER_LEN..],
            &[0x34, 0x12, 0xFE, 0xFF],
            "byte-aligned items are little-endian"
        );
    }

    #[test]
    fn legacy_headers() {
        let one = 1.0f32.to_bits();
        let (min, max) = ((-1.0f32).to_bits(), 2.0f32.to_bits());
        check(
            &[
                (
                    "legacy float",
                    file(&[2], 32, 0, [0, 0], &[0, 0, 128, 63, 0, 0, 0, 64]),
                ),
                ("legacy unsigned int", file(&[2], 8, 1, [0, 0], &[255, 1])),
                ("legacy signed int", file(&[2], 8, 1, [one, 0], &[255, 1])),
                (
                    "legacy signed int32",
                    file(&[1], 32, 1, [one, 0], &(-5i32).to_le_bytes()),
                ),
                (
                    "legacy 1-bit int (bool)",
                    file(&[3], 1, 1, [0, 0], &[0b1010_0000]),
                ),
                ("legacy linear", file(&[2], 8, 0x10, [min, max], &[0, 255])),
                (
                    "legacy logarithmic",
                    file(&[1, 1], 4, 0x11, [min, max], &[0xF0]),
                ),
            ],
            expect![[r#"
                legacy float: float32 [2] [1.0, 2.0]
                legacy unsigned int: uint8 [2] [255, 1]
                legacy signed int: int8 [2] [-1, 1]
                legacy signed int32: int32 [1] [-5]
                legacy 1-bit int (bool): uint1 [3] [1, 0, 1]
                legacy linear: quantized uint8 [2] LegacyLinear { min: -1.0, max: 2.0 } [0.0, 255.0]
                legacy logarithmic: quantized uint4 [1, 1] LegacyLogarithmic { min: -1.0, max: 2.0 } [15.0]
            "#]],
        );
        let legacy_bool = read_dat(&file(&[3], 1, 1, [0, 0], &[0b1010_0000])).unwrap();
        let conformed = legacy_bool.conform(&[3], DType::Bool).unwrap();
        assert_eq!(
            conformed.data,
            Tensor::bool(vec![3], vec![true, false, true])
        );
    }

    #[test]
    fn corrupted_files() {
        let good = write_dat_f32(&[1, 3, 224, 224], &vec![0.5; 150528]).unwrap();
        let with = |offset: usize, word: u32| {
            let mut f = good.clone();
            f[offset..offset + 4].copy_from_slice(&word.to_le_bytes());
            f
        };
        let mut bad_magic = good.clone();
        bad_magic[1] = 0xEE;
        let mut bad_version = good.clone();
        bad_version[3] = 3;
        let mut short_data = good[..HEADER_LEN].to_vec();
        short_data.extend_from_slice(&[0; 4096]);
        let mut extra4 = good.clone();
        extra4.extend_from_slice(&[0; 4]);
        check(
            &[
                ("empty", vec![]),
                ("truncated header", good[..100].to_vec()),
                ("bad magic", bad_magic),
                ("bad version", bad_version),
                ("rank 9", with(8, 9)),
                ("rank huge", with(8, u32::MAX)),
                ("unknown code", with(48, 7)),
                ("vendor code", with(48, 0x5452_0003)),
                ("float 8 bits", with(44, 8)),
                ("bool 2 bits", file(&[1], 2, 5, [0, 0], &[0])),
                ("int 65 bits", file(&[1], 65, 4, [0, 0], &[0; 9])),
                ("int 0 bits", file(&[1], 0, 4, [0, 0], &[])),
                ("quantized 32 bits", file(&[1], 32, 3, [0, 0], &[0; 4])),
                ("length field wrong", with(4, 4096)),
                ("truncated data", good[..HEADER_LEN + 1000].to_vec()),
                ("short file", short_data),
                ("132-byte header", extra4),
                ("huge extents", file(&[u32::MAX; 8], 64, 0, [0, 0], &[])),
                (
                    "uint32 out of range",
                    file(&[2], 32, 1, [0, 0], &[0, 0, 0, 0, 0, 0, 0, 0x80]),
                ),
                (
                    "int64 out of range",
                    file(&[1], 64, 4, [0, 0], &(-(1i64 << 40)).to_le_bytes()),
                ),
                (
                    "float64 out of range",
                    file(&[1], 64, 0, [0, 0], &1e300f64.to_le_bytes()),
                ),
            ],
            expect![[r#"
                empty: error: file is 0 bytes long, shorter than the 128-byte .dat header
                truncated header: error: file is 100 bytes long, shorter than the 128-byte .dat header
                bad magic: error: not an NNEF .dat file: magic bytes are 4e ee, expected 4e ef
                bad version: error: unsupported .dat version 1.3 (only 1.0 is defined)
                rank 9: error: header says rank 9, but a .dat file holds at most rank 8
                rank huge: error: header says rank 4294967295, but a .dat file holds at most rank 8
                unknown code: error: unknown item type code 7 (1.0.3+ codes are 0-5; legacy quantization codes 0x10, 0x11)
                vendor code: error: vendor-defined item type (vendor 0x5452, code 3) is not supported
                float 8 bits: error: float items cannot be 8 bits wide (allowed: 16, 32 or 64)
                bool 2 bits: error: bool items cannot be 2 bits wide (allowed: 1 or 8)
                int 65 bits: error: signed integer items cannot be 65 bits wide (allowed: 1 to 64)
                int 0 bits: error: signed integer items cannot be 0 bits wide (allowed: 1 to 64)
                quantized 32 bits: error: quantized codes of 32 bits are not supported: float32 holds integer codes exactly only up to 24 bits
                length field wrong: error: header says 4096 data bytes, but 150528 items of float32 take 602112 bytes
                truncated data: error: header says 150528 items of float32 (602112 bytes) but the file has 1000 data bytes
                short file: error: header says 150528 items of float32 (602112 bytes) but the file has 4096 data bytes
                132-byte header: error: header says 150528 items of float32 (602112 bytes) but the file has 602116 data bytes (4 bytes too many: possibly written by an early NNEF Python writer with a 132-byte header)
                huge extents: error: tensor of shape [4294967295, 4294967295, 4294967295, 4294967295, 4294967295, 4294967295, 4294967295, 4294967295] with 64-bit items is too large to address
                uint32 out of range: error: item 1 is 2147483648, outside the range of a 32-bit integer
                int64 out of range: error: item 0 is -1099511627776, outside the range of a 32-bit integer
                float64 out of range: error: item 0 is 1e300, outside the range of float32
            "#]],
        );
    }

    #[test]
    fn conform_checks_declaration() {
        let t = read_dat(&write_dat_f32(&[1, 2], &[1.0, 2.0]).unwrap()).unwrap();
        let results = [
            t.clone().conform(&[1, 2], DType::F32).map(|_| ()),
            t.clone().conform(&[2, 1], DType::F32).map(|_| ()),
            t.clone().conform(&[1, 2], DType::I32).map(|_| ()),
        ];
        let text: Vec<String> = results.iter().map(|r| format!("{r:?}")).collect();
        let text: Vec<String> = results
            .iter()
            .zip(text)
            .map(|(r, dbg)| r.as_ref().err().map(|e| e.to_string()).unwrap_or(dbg))
            .collect();
        expect![[r#"
            Ok(())
            the file holds a tensor of shape [1, 2], but the variable is declared with shape [2, 1]
            the file holds float32 items (scalar), but the variable is declared integer"#]]
        .assert_eq(&text.join("\n"));
    }

    #[test]
    fn writer_rejects_bad_input() {
        let errs = [
            write_dat(&Tensor::f32(vec![1; 9], vec![0.0]), ItemType::F32),
            write_dat(
                &Tensor {
                    shape: vec![2],
                    data: TensorData::F32(vec![0.0]),
                },
                ItemType::F32,
            ),
            write_dat(
                &Tensor::i32(vec![1], vec![256]),
                ItemType::new(ItemKind::Unsigned, 8),
            ),
            write_dat(
                &Tensor::i32(vec![1], vec![-1]),
                ItemType::new(ItemKind::Unsigned, 8),
            ),
            write_dat(
                &Tensor::f32(vec![1], vec![0.5]),
                ItemType::new(ItemKind::QuantizedSigned, 8),
            ),
            write_dat(
                &Tensor::f32(vec![1], vec![1e6]),
                ItemType::new(ItemKind::Float, 16),
            ),
            write_dat(
                &Tensor::f32(vec![1], vec![1.0]),
                ItemType::new(ItemKind::Signed, 8),
            ),
            write_dat(
                &Tensor::f32(vec![1], vec![1.0]),
                ItemType::new(ItemKind::Float, 8),
            ),
        ];
        let text: Vec<String> = errs
            .iter()
            .map(|r| r.as_ref().err().map(|e| e.to_string()).unwrap_or_default())
            .collect();
        expect![[r#"
            cannot write: shape has rank 9, a .dat file holds at most rank 8
            cannot write: shape [2] has 2 items but 1 values were given
            cannot write: value 256 at index 0 is not representable as uint8
            cannot write: value -1 at index 0 is not representable as uint8
            cannot write: value 0.5 at index 0 is not representable as quantized int8
            cannot write: value 1000000 at index 0 is not representable as float16
            cannot write f32 values as int8 items
            float items cannot be 8 bits wide (allowed: 16, 32 or 64)"#]]
        .assert_eq(&text.join("\n"));
    }

    #[test]
    fn f16_conversion_is_exact_both_ways() {
        // Every finite half survives half -> f32 -> half; NaNs stay NaN.
        for h in 0..=u16::MAX {
            let f = f16_bits_to_f32(h);
            if f.is_nan() {
                assert!(f16_bits_to_f32(f32_to_f16_bits(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16_bits(f), h, "half {h:#06x} = {f}");
            }
        }
        // Ties round to even; below half the smallest subnormal rounds to zero.
        assert_eq!(f32_to_f16_bits(1.0 + f32::powi(2.0, -11)), 0x3C00);
        assert_eq!(f32_to_f16_bits(1.0 + 3.0 * f32::powi(2.0, -11)), 0x3C02);
        assert_eq!(f32_to_f16_bits(f32::powi(2.0, -26)), 0);
        assert_eq!(f32_to_f16_bits(65520.0), 0x7C00);
    }

    proptest! {
        #[test]
        fn read_dat_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = read_dat(&bytes);
        }

        /// Plausible headers (right magic and version, small fields) reach the deeper checks.
        #[test]
        fn read_dat_never_panics_on_plausible_headers(
            shape in proptest::collection::vec(0u32..6, 0..9),
            bits in 0u32..70,
            code in prop_oneof![0u32..7, Just(0x10), Just(0x11)],
            reserved in any::<[u32; 2]>(),
            data in proptest::collection::vec(any::<u8>(), 0..300),
            lie in any::<bool>(),
        ) {
            let mut f = file(&shape, bits, code, reserved, &data);
            if lie {
                let volume: u64 = shape.iter().map(|&e| u64::from(e)).product();
                let need = (volume * u64::from(bits)).div_ceil(8) as u32;
                f[4..8].copy_from_slice(&need.to_le_bytes());
            }
            if let Ok(t) = read_dat(&f) {
                prop_assert_eq!(t.data.len(), t.shape.iter().product::<usize>());
            }
        }

        #[test]
        fn f32_round_trip(values in proptest::collection::vec(any::<f32>().prop_filter("not NaN", |x| !x.is_nan()), 0..50)) {
            let bytes = write_dat_f32(&[values.len()], &values).unwrap();
            let back = read_dat(&bytes).unwrap();
            prop_assert_eq!(back.data.as_f32().unwrap(), &values[..]);
        }
    }
}
