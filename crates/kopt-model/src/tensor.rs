//! Tensors for the correctness gate, as plain data: a named tensor's
//! shape, element type and byte order over raw bytes shared with the
//! buffer of the file it came from (never copied), elements converted one
//! at a time as they are read ([`Tensor::scalars`], [`Tensor::values`]).
//! Two 50 MB `u8` arrays cost about 100 MB, not the 800 MB of widening every
//! element to `f64`. Reading `.npy` / `.safetensors` files is kopt-ingest's
//! (`kopt_ingest::tensor`); comparing tensors is kopt-bench's.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::text::one_line;

/// A tensor that cannot be built: the bytes do not match its shape and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorError {
    /// The tensor's name (a parser's: the file's path).
    pub name: String,
    pub message: String,
}

impl TensorError {
    pub fn new(name: &str, message: impl Into<String>) -> TensorError {
        TensorError {
            name: name.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for TensorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", one_line(&self.name), one_line(&self.message))
    }
}

impl std::error::Error for TensorError {}

/// Element types kopt compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
}

impl DType {
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }
}

/// The byte order of a tensor's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

/// Where a tensor came from: it decides how tensors pair up (two single
/// `.npy` files pair whatever their names; everything else pairs by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorFormat {
    /// A `.npy` file: one tensor, named after the file.
    Npy,
    /// A `.safetensors` file: tensors named by its header.
    Safetensors,
    /// Built in memory ([`Tensor::new`], [`Tensor::from_values`]).
    InMemory,
}

/// One element, converted from its type without loss: integers (and
/// booleans, 0 or 1) stay integers so two `i64` compare exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f64),
}

impl Scalar {
    /// The value as f64 (integers beyond 2^53 round).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
}

/// One named tensor: its shape, element type and byte order, and its raw
/// bytes, shared with the buffer of the file it was read from.
///
/// The bytes always hold exactly `shape`'s element count of `dtype` as
/// built; the element accessors read whole elements of the bytes only, so a
/// caller that edits the public fields afterwards gets different values,
/// never a panic.
#[derive(Clone)]
pub struct Tensor {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub byte_order: ByteOrder,
    pub format: TensorFormat,
    buffer: Arc<Vec<u8>>,
    data: Range<usize>,
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.name == other.name
            && self.dtype == other.dtype
            && self.shape == other.shape
            && self.byte_order == other.byte_order
            && self.format == other.format
            && self.data() == other.data()
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("name", &self.name)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("byte_order", &self.byte_order)
            .field("format", &self.format)
            .field("data_bytes", &self.data().len())
            .finish()
    }
}

/// The number of elements of `shape`, or `None` when it overflows `usize`.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// The bytes `shape` elements of `dtype` take, or `None` when it overflows.
pub fn byte_count(dtype: DType, shape: &[usize]) -> Option<usize> {
    element_count(shape)?.checked_mul(dtype.size())
}

impl Tensor {
    /// A tensor over `data`, which must hold exactly `shape`'s element
    /// count of `dtype` in `byte_order`.
    pub fn new(
        name: impl Into<String>,
        dtype: DType,
        shape: Vec<usize>,
        byte_order: ByteOrder,
        data: Vec<u8>,
    ) -> Result<Tensor, TensorError> {
        let name = name.into();
        match byte_count(dtype, &shape) {
            Some(n) if n == data.len() => {}
            Some(n) => {
                return Err(TensorError::new(
                    &name,
                    format!(
                        "{} bytes for shape {shape:?} of {}, which needs {n}",
                        data.len(),
                        dtype.name()
                    ),
                ))
            }
            None => return Err(TensorError::new(&name, overflow_message(dtype, &shape))),
        }
        let len = data.len();
        Ok(Tensor {
            name,
            dtype,
            shape,
            byte_order,
            format: TensorFormat::InMemory,
            buffer: Arc::new(data),
            data: 0..len,
        })
    }

    /// A little-endian tensor holding `values` converted to `dtype` as Rust's
    /// `as` would (floats rounded to nearest, integers saturated and
    /// truncated, booleans non-zero). For tests and exporters.
    pub fn from_values(
        name: impl Into<String>,
        dtype: DType,
        shape: Vec<usize>,
        values: &[f64],
    ) -> Result<Tensor, TensorError> {
        let mut data = Vec::new();
        for &v in values {
            encode(dtype, v, &mut data);
        }
        Tensor::new(name, dtype, shape, ByteOrder::Little, data)
    }

    /// A tensor over `buffer[data]`, sharing the buffer (a parser hands
    /// every tensor of one file the file's bytes). The parser checked that
    /// the range lies in the buffer and holds `shape`'s elements; were it
    /// not so, the accessors would read fewer elements, never panic.
    pub fn from_shared(
        name: String,
        dtype: DType,
        shape: Vec<usize>,
        byte_order: ByteOrder,
        format: TensorFormat,
        buffer: Arc<Vec<u8>>,
        data: Range<usize>,
    ) -> Tensor {
        Tensor {
            name,
            dtype,
            shape,
            byte_order,
            format,
            buffer,
            data,
        }
    }

    /// Whether the two tensors' bytes are one buffer (read from one file).
    pub fn shares_buffer(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.buffer, &other.buffer)
    }

    /// The raw bytes of the elements, in [`Tensor::byte_order`].
    pub fn data(&self) -> &[u8] {
        self.buffer.get(self.data.clone()).unwrap_or_default()
    }

    /// The number of elements held.
    pub fn len(&self) -> usize {
        self.data().len() / self.dtype.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements in order, each converted as it is read.
    pub fn scalars(&self) -> Scalars<'_> {
        Scalars {
            chunks: self.data().chunks_exact(self.dtype.size()),
            dtype: self.dtype,
            big_endian: self.byte_order == ByteOrder::Big,
        }
    }

    /// The elements in order as f64, each converted as it is read.
    pub fn values(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.scalars().map(Scalar::to_f64)
    }

    /// Element `i` (C order), if there is one.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        let size = self.dtype.size();
        let at = i.checked_mul(size)?;
        let bytes = self.data().get(at..at.checked_add(size)?)?;
        Some(decode_one(
            self.dtype,
            self.byte_order == ByteOrder::Big,
            bytes,
        ))
    }
}

/// The elements of a tensor, converted one at a time.
#[derive(Debug, Clone)]
pub struct Scalars<'a> {
    chunks: std::slice::ChunksExact<'a, u8>,
    dtype: DType,
    big_endian: bool,
}

impl Iterator for Scalars<'_> {
    type Item = Scalar;

    fn next(&mut self) -> Option<Scalar> {
        let c = self.chunks.next()?;
        Some(decode_one(self.dtype, self.big_endian, c))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.chunks.size_hint()
    }
}

impl ExactSizeIterator for Scalars<'_> {}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// f32 to f16, rounding to nearest even (overflow to infinity).
fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x007f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x0200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let round = |kept: u32, rest: u32, half: u32| -> u32 {
        if rest > half || (rest == half && kept & 1 == 1) {
            kept + 1
        } else {
            kept
        }
    };
    if e <= 0 {
        // Subnormal (or zero) in f16: the 24-bit significand shifted down.
        if e < -10 {
            return sign;
        }
        let m = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let kept = m >> shift;
        let rest = m & ((1u32 << shift) - 1);
        return sign | round(kept, rest, 1u32 << (shift - 1)) as u16;
    }
    let kept = ((e as u32) << 10) | (man >> 13);
    // A carry out of the significand moves into the exponent, as it should.
    sign | round(kept, man & 0x1fff, 0x1000) as u16
}

/// f32 to bf16, rounding to nearest even.
fn f32_to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7fc0;
    }
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (rounded >> 16) as u16
}

/// `N` bytes of `c` (shorter input is zero-padded), in little-endian order.
pub fn le<const N: usize>(c: &[u8], big_endian: bool) -> [u8; N] {
    let mut a = [0u8; N];
    for (d, s) in a.iter_mut().zip(c) {
        *d = *s;
    }
    if big_endian {
        a.reverse();
    }
    a
}

fn decode_one(dtype: DType, big_endian: bool, c: &[u8]) -> Scalar {
    match dtype {
        DType::F64 => Scalar::Float(f64::from_le_bytes(le(c, big_endian))),
        DType::F32 => Scalar::Float(f32::from_le_bytes(le(c, big_endian)) as f64),
        DType::F16 => Scalar::Float(f16_to_f64(u16::from_le_bytes(le(c, big_endian)))),
        DType::BF16 => Scalar::Float(f32::from_bits(
            u32::from(u16::from_le_bytes(le(c, big_endian))) << 16,
        ) as f64),
        DType::I64 => Scalar::Int(i64::from_le_bytes(le(c, big_endian))),
        DType::I32 => Scalar::Int(i32::from_le_bytes(le(c, big_endian)).into()),
        DType::I16 => Scalar::Int(i16::from_le_bytes(le(c, big_endian)).into()),
        DType::I8 => Scalar::Int(i8::from_le_bytes(le(c, false)).into()),
        DType::U8 => Scalar::Int(u8::from_le_bytes(le(c, false)).into()),
        DType::Bool => Scalar::Int(i64::from(u8::from_le_bytes(le(c, false)) != 0)),
    }
}

fn encode(dtype: DType, v: f64, out: &mut Vec<u8>) {
    match dtype {
        DType::F64 => out.extend_from_slice(&v.to_le_bytes()),
        DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        DType::F16 => out.extend_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
        DType::BF16 => out.extend_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
        DType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
        DType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        DType::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
        DType::I8 => out.extend_from_slice(&(v as i8).to_le_bytes()),
        DType::U8 => out.push(v as u8),
        DType::Bool => out.push(u8::from(v != 0.0)),
    }
}

pub fn overflow_message(dtype: DType, shape: &[usize]) -> String {
    format!(
        "shape {shape:?} of {}: its size overflows (more bytes than memory can address)",
        dtype.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precisions() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert!(f16_to_f64(0x7e00).is_nan());
        assert_eq!(f16_to_f64(0x7c00), f64::INFINITY);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        let t = Tensor::new(
            "b",
            DType::BF16,
            vec![1],
            ByteOrder::Little,
            0x3f80u16.to_le_bytes().to_vec(),
        )
        .unwrap();
        assert_eq!(t.values().collect::<Vec<_>>(), vec![1.0]);
        // Encoding rounds to nearest and decodes back exactly when representable.
        for v in [0.0, 1.0, -2.0, 0.5, 65504.0, 2f64.powi(-24), -3.0e-5] {
            let h = f32_to_f16(v as f32);
            assert!(
                (f16_to_f64(h) - v).abs() <= v.abs() * 1e-3,
                "{v} -> {h:#x} -> {}",
                f16_to_f64(h)
            );
        }
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        let t = Tensor::from_values("h", DType::F16, vec![3], &[1.0, -2.0, 0.5]).unwrap();
        assert_eq!(t.values().collect::<Vec<_>>(), vec![1.0, -2.0, 0.5]);
    }
}
