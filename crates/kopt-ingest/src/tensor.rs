//! Tensors for the correctness gate: NumPy `.npy` and `.safetensors` files
//! (bf16 arrives through safetensors).
//!
//! A file is read into memory once; its tensors keep their raw bytes (shared
//! with that buffer, never copied) with their element type and byte order,
//! and elements are converted one at a time as they are read
//! ([`Tensor::scalars`], [`Tensor::values`]). Two 50 MB `u8` arrays cost
//! about 100 MB, not the 800 MB of widening every element to `f64`.
//!
//! Every size and offset a file declares is checked (overflow, bounds, the
//! byte count its shape and type need) before anything is sliced or
//! allocated: a malformed file is an [`IngestError`] naming it, never a panic.

use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use kopt_model::tensor::{byte_count, le, overflow_message, TensorError};
// The tensor itself is plain data in kopt-model; its readers are here.
pub use kopt_model::tensor::{
    element_count, ByteOrder, DType, Scalar, Scalars, Tensor, TensorFormat,
};

use crate::{echo, IngestError};

impl From<TensorError> for IngestError {
    fn from(e: TensorError) -> IngestError {
        IngestError::Format {
            path: e.name,
            message: e.message,
        }
    }
}

/// The first bytes of every `.npy` file.
const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// The type of a safetensors header's `dtype`.
fn dtype_from_safetensors(code: &str) -> Option<DType> {
    Some(match code {
        "F64" => DType::F64,
        "F32" => DType::F32,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "I64" => DType::I64,
        "I32" => DType::I32,
        "I16" => DType::I16,
        "I8" => DType::I8,
        "U8" => DType::U8,
        "BOOL" => DType::Bool,
        _ => return None,
    })
}

/// The type of a `.npy` `descr` without its byte-order character.
fn dtype_from_npy(code: &str) -> Option<DType> {
    Some(match code {
        "f8" => DType::F64,
        "f4" => DType::F32,
        "f2" => DType::F16,
        "i8" => DType::I64,
        "i4" => DType::I32,
        "i2" => DType::I16,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "b1" => DType::Bool,
        _ => return None,
    })
}

fn fail(path: &str, message: impl Into<String>) -> IngestError {
    IngestError::Format {
        path: path.into(),
        message: message.into(),
    }
}

// ---- .npy ----

/// The fields of a `.npy` header that kopt reads.
struct NpyHeader {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// A value of the header's Python dict literal.
enum PyValue {
    Str(String),
    Bool(bool),
    Tuple(Vec<String>),
}

/// A cursor over the header's Python literal: `{'descr': '<f4',
/// 'fortran_order': False, 'shape': (2, 3), }` padded with spaces.
struct PyLiteral<'a> {
    s: &'a [u8],
    at: usize,
}

impl PyLiteral<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("header byte {}: expected {what}", self.at))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_ws();
        let quote = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("header byte {}: expected a quoted string", self.at)),
        };
        let start = self.at + 1;
        let len = self
            .s
            .get(start..)
            .and_then(|rest| rest.iter().position(|&b| b == quote))
            .ok_or_else(|| format!("header byte {}: unterminated string", self.at))?;
        let end = start + len;
        let text = self
            .s
            .get(start..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| format!("header byte {start}: a string is not UTF-8"))?;
        self.at = end + 1;
        Ok(text.to_string())
    }

    fn word(&mut self) -> &[u8] {
        self.skip_ws();
        let start = self.at;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'.'))
        {
            self.at += 1;
        }
        self.s.get(start..self.at).unwrap_or_default()
    }

    fn value(&mut self) -> Result<PyValue, String> {
        self.skip_ws();
        match self.peek() {
            Some(b'\'' | b'"') => self.string().map(PyValue::Str),
            Some(b'(') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    let at = self.at;
                    let item = self.word();
                    if item.is_empty() {
                        return Err(format!("header byte {at}: expected a number in the tuple"));
                    }
                    items.push(String::from_utf8_lossy(item).into_owned());
                    if !self.eat(b',') {
                        self.expect(b')', "',' or ')' in the tuple")?;
                        break;
                    }
                }
                Ok(PyValue::Tuple(items))
            }
            _ => {
                let at = self.at;
                match self.word() {
                    b"True" => Ok(PyValue::Bool(true)),
                    b"False" => Ok(PyValue::Bool(false)),
                    _ => Err(format!(
                        "header byte {at}: expected a string, a tuple, True or False"
                    )),
                }
            }
        }
    }
}

fn parse_npy_header(text: &str) -> Result<NpyHeader, String> {
    let mut p = PyLiteral {
        s: text.as_bytes(),
        at: 0,
    };
    p.expect(b'{', "'{'")?;
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    loop {
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':', "':'")?;
        let value = p.value()?;
        let slot_taken = match (key.as_str(), value) {
            ("descr", PyValue::Str(s)) => descr.replace(s).is_some(),
            ("descr", _) => {
                return Err("'descr' is not a string (structured dtypes are not supported)".into())
            }
            ("fortran_order", PyValue::Bool(b)) => fortran_order.replace(b).is_some(),
            ("fortran_order", _) => return Err("'fortran_order' is not True or False".into()),
            ("shape", PyValue::Tuple(items)) => shape.replace(items).is_some(),
            ("shape", _) => return Err("'shape' is not a tuple".into()),
            _ => false,
        };
        if slot_taken {
            return Err(format!("'{}' appears twice", echo(&key)));
        }
        if !p.eat(b',') {
            p.expect(b'}', "',' or '}'")?;
            break;
        }
    }
    p.skip_ws();
    if p.at != p.s.len() {
        return Err(format!("header byte {}: text after the dict", p.at));
    }
    let descr = descr.ok_or("the header has no 'descr'")?;
    let shape = shape
        .ok_or("the header has no 'shape'")?
        .iter()
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| format!("shape entry '{}' is not a non-negative integer", echo(d)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NpyHeader {
        descr,
        fortran_order: fortran_order.ok_or("the header has no 'fortran_order'")?,
        shape,
    })
}

/// The element type and byte order of a `.npy` `descr` such as `<f4`.
fn npy_dtype(descr: &str) -> Result<(DType, ByteOrder), String> {
    // The order character is ASCII, so the rest starts at byte 1; a descr
    // without one (or starting with anything else) is looked up whole.
    let (order, code) = match descr.as_bytes().first() {
        Some(b'<' | b'|' | b'=') => (ByteOrder::Little, descr.get(1..)),
        Some(b'>') => (ByteOrder::Big, descr.get(1..)),
        _ => (ByteOrder::Little, Some(descr)),
    };
    code.and_then(dtype_from_npy)
        .map(|d| (d, order))
        .ok_or_else(|| {
            format!(
                "dtype '{}' is not supported (f8 f4 f2 i8 i4 i2 i1 u1 b1; bf16: save as .safetensors)",
                echo(descr)
            )
        })
}

/// What a `.npy` file holds: type, order, shape and where its data lies.
struct NpyLayout {
    dtype: DType,
    order: ByteOrder,
    shape: Vec<usize>,
    data: Range<usize>,
}

fn npy_layout(bytes: &[u8], path: &str) -> Result<NpyLayout, IngestError> {
    if !bytes.starts_with(NPY_MAGIC) {
        return Err(fail(path, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let version = bytes
        .get(6)
        .copied()
        .ok_or_else(|| fail(path, "truncated .npy preamble"))?;
    let (len, start) = match version {
        1 => (
            bytes
                .get(8..10)
                .map(|b| usize::from(u16::from_le_bytes(le(b, false)))),
            10usize,
        ),
        2 | 3 => (
            bytes
                .get(8..12)
                .and_then(|b| usize::try_from(u32::from_le_bytes(le(b, false))).ok()),
            12,
        ),
        v => return Err(fail(path, format!("unsupported .npy version {v}"))),
    };
    let len = len.ok_or_else(|| fail(path, "truncated .npy preamble"))?;
    let header_end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            fail(
                path,
                format!(
                    "truncated .npy header: {len} bytes declared, {} present",
                    bytes.len().saturating_sub(start)
                ),
            )
        })?;
    let raw = bytes.get(start..header_end).unwrap_or_default();
    // Versions 1 and 2 are Latin-1, version 3 UTF-8.
    let text: String = if version == 3 {
        std::str::from_utf8(raw)
            .map_err(|e| fail(path, format!(".npy header is not UTF-8: {e}")))?
            .to_string()
    } else {
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let header = parse_npy_header(&text).map_err(|m| fail(path, format!(".npy header: {m}")))?;
    let (dtype, order) = npy_dtype(&header.descr).map_err(|m| fail(path, m))?;
    let shape = header.shape;
    // Fortran order lays out the same bytes when at most one axis is longer than 1.
    if header.fortran_order && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(fail(
            path,
            "Fortran-order arrays are not supported: save with np.ascontiguousarray",
        ));
    }
    let count = element_count(&shape);
    let nbytes =
        byte_count(dtype, &shape).ok_or_else(|| fail(path, overflow_message(dtype, &shape)))?;
    let present = bytes.len().saturating_sub(header_end);
    if present != nbytes {
        let what = if present < nbytes {
            "truncated"
        } else {
            "bytes after the data"
        };
        return Err(fail(
            path,
            format!(
                "{what}: shape {shape:?} of {} is {} element(s), {nbytes} bytes after byte {header_end}, and {present} are there",
                dtype.name(),
                count.unwrap_or(0),
            ),
        ));
    }
    Ok(NpyLayout {
        dtype,
        order,
        shape,
        data: header_end..bytes.len(),
    })
}

/// The name a `.npy` file's tensor gets: its file name without extension.
fn npy_name(path: &str) -> String {
    Path::new(path)
        .file_stem()
        .map_or("tensor".into(), |s| s.to_string_lossy().into_owned())
}

fn npy_tensor(buffer: Arc<Vec<u8>>, path: &str) -> Result<Tensor, IngestError> {
    let l = npy_layout(&buffer, path)?;
    Ok(Tensor::from_shared(
        npy_name(path),
        l.dtype,
        l.shape,
        l.order,
        TensorFormat::Npy,
        buffer,
        l.data,
    ))
}

/// A `.npy` file (format versions 1-3, C order; Fortran order where it is
/// the same layout). The tensor is named after the file.
pub fn parse_npy(bytes: &[u8], path: &str) -> Result<Tensor, IngestError> {
    // Checked before anything is copied.
    let l = npy_layout(bytes, path)?;
    let data = bytes.get(l.data).unwrap_or_default().to_vec();
    let len = data.len();
    Ok(Tensor::from_shared(
        npy_name(path),
        l.dtype,
        l.shape,
        l.order,
        TensorFormat::Npy,
        Arc::new(data),
        0..len,
    ))
}

// ---- .safetensors ----

/// A JSON object's members in file order, duplicates kept (a map would keep
/// only the last of two tensors of the same name).
struct Members(Vec<(String, serde_json::Value)>);

/// Most entries a safetensors header may list: a model's shard holds a few
/// thousand tensors; 1.5 million entries took 3.2 GB to read (#39).
const MAX_SAFETENSORS_ENTRIES: usize = 100_000;

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Members, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry::<String, serde_json::Value>()? {
                    if out.len() >= MAX_SAFETENSORS_ENTRIES {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_SAFETENSORS_ENTRIES} entries: not a tensor file kopt compares (each costs memory as it is read)"
                        )));
                    }
                    out.push(kv);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// One tensor of a safetensors header, checked.
struct Entry {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    /// Offsets into the data section (after the header).
    offsets: Range<usize>,
}

fn safetensors_entry(
    name: &str,
    info: &serde_json::Value,
    path: &str,
) -> Result<Entry, IngestError> {
    let bad = |m: String| fail(path, format!("tensor '{}': {m}", echo(name)));
    let info = info
        .as_object()
        .ok_or_else(|| bad("its entry is not an object".into()))?;
    let code = info
        .get("dtype")
        .and_then(|d| d.as_str())
        .ok_or_else(|| bad("no dtype".into()))?;
    let dtype = dtype_from_safetensors(code)
        .ok_or_else(|| bad(format!("dtype '{}' is not supported", echo(code))))?;
    let shape = info
        .get("shape")
        .and_then(|s| s.as_array())
        .ok_or_else(|| bad("no shape".into()))?
        .iter()
        .map(|d| {
            d.as_u64()
                .and_then(|d| usize::try_from(d).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "shape entry {} is not a non-negative integer",
                        echo(&d.to_string())
                    ))
                })
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let offsets = info
        .get("data_offsets")
        .ok_or_else(|| bad("no data_offsets".into()))?;
    let pair: Vec<usize> = offsets
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|o| o.as_u64().and_then(|o| usize::try_from(o).ok()))
                .collect()
        })
        .unwrap_or_default();
    let (begin, end) = match (offsets.as_array().map(Vec::len), pair.as_slice()) {
        (Some(2), &[b, e]) => (b, e),
        _ => {
            return Err(bad(format!(
                "data_offsets must be [begin, end] of non-negative integers, found {}",
                echo(&offsets.to_string())
            )))
        }
    };
    if begin > end {
        return Err(bad(format!(
            "data_offsets [{begin}, {end}] end before they begin"
        )));
    }
    let need = byte_count(dtype, &shape).ok_or_else(|| bad(overflow_message(dtype, &shape)))?;
    if end - begin != need {
        return Err(bad(format!(
            "data_offsets [{begin}, {end}] hold {} bytes, and shape {shape:?} of {} needs {need}",
            end - begin,
            dtype.name()
        )));
    }
    Ok(Entry {
        name: name.to_string(),
        dtype,
        shape,
        offsets: begin..end,
    })
}

/// Every tensor of a safetensors file (checked: no overlap, no hole, nothing
/// out of bounds) with its absolute byte range, in name order.
fn safetensors_layout(bytes: &[u8], path: &str) -> Result<Vec<Entry>, IngestError> {
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(le(b, false)))
        .ok_or_else(|| {
            fail(
                path,
                "not a .safetensors file (shorter than its 8-byte header length)",
            )
        })?;
    let header_end = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            fail(
                path,
                format!(
                    "the .safetensors header is {n} bytes long, and only {} follow its length",
                    bytes.len().saturating_sub(8)
                ),
            )
        })?;
    let header = bytes.get(8..header_end).unwrap_or_default();
    let Members(members) = serde_json::from_slice(header).map_err(|e| {
        fail(
            path,
            format!("byte 8: the .safetensors JSON header is invalid: {e}"),
        )
    })?;
    let data_len = bytes.len().saturating_sub(header_end);
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    for (name, info) in &members {
        if !seen.insert(name.as_str()) {
            return Err(fail(
                path,
                format!("tensor '{}' is listed twice", echo(name)),
            ));
        }
        if name == "__metadata__" {
            continue;
        }
        let e = safetensors_entry(name, info, path)?;
        if e.offsets.end > data_len {
            return Err(fail(
                path,
                format!(
                    "tensor '{}': data {}..{} lies past the end of the data ({data_len} bytes; truncated?)",
                    echo(name),
                    e.offsets.start,
                    e.offsets.end
                ),
            ));
        }
        entries.push(e);
    }
    // The data must be covered exactly once, as the format requires: an
    // overlap would let two tensors share bytes, a hole hide data.
    entries.sort_by_key(|e| (e.offsets.start, e.offsets.end));
    let mut covered = 0usize;
    let mut last: Option<&Entry> = None;
    for e in &entries {
        if e.offsets.start < covered {
            return Err(fail(
                path,
                format!(
                    "tensors '{}' and '{}' overlap (data {}..{} and {}..{})",
                    echo(last.map_or("", |l| l.name.as_str())),
                    echo(&e.name),
                    last.map_or(0, |l| l.offsets.start),
                    covered,
                    e.offsets.start,
                    e.offsets.end
                ),
            ));
        }
        if e.offsets.start > covered {
            return Err(fail(
                path,
                format!(
                    "data {covered}..{} belongs to no tensor (a hole before '{}')",
                    e.offsets.start,
                    echo(&e.name)
                ),
            ));
        }
        covered = e.offsets.end;
        if !e.offsets.is_empty() {
            last = Some(e);
        }
    }
    if covered != data_len {
        return Err(fail(
            path,
            format!("data {covered}..{data_len} after the last tensor belongs to no tensor"),
        ));
    }
    for e in &mut entries {
        e.offsets = header_end + e.offsets.start..header_end + e.offsets.end;
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

fn safetensors_tensors(buffer: Arc<Vec<u8>>, path: &str) -> Result<Vec<Tensor>, IngestError> {
    let entries = safetensors_layout(&buffer, path)?;
    Ok(entries
        .into_iter()
        .map(|e| {
            Tensor::from_shared(
                e.name,
                e.dtype,
                e.shape,
                ByteOrder::Little,
                TensorFormat::Safetensors,
                Arc::clone(&buffer),
                e.offsets,
            )
        })
        .collect())
}

/// Every tensor of a `.safetensors` file, in name order (none for an empty
/// header: a valid file that holds nothing).
pub fn parse_safetensors(bytes: &[u8], path: &str) -> Result<Vec<Tensor>, IngestError> {
    // Checked before anything is copied.
    safetensors_layout(bytes, path)?;
    safetensors_tensors(Arc::new(bytes.to_vec()), path)
}

// ---- files ----

/// The whole of a regular file, its size checked before the buffer is
/// allocated.
fn read_file(path: &Path, label: &str) -> Result<Vec<u8>, IngestError> {
    let io = |source| IngestError::Io {
        path: label.to_string(),
        source,
    };
    let file = crate::open_regular(path, label)?;
    let size = file.metadata().map_err(io)?.len();
    let len = usize::try_from(size)
        .map_err(|_| fail(label, format!("{size} bytes: too large to read")))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| fail(label, format!("cannot allocate {len} bytes to read it")))?;
    let mut file = file.take(size);
    file.read_to_end(&mut bytes).map_err(io)?;
    let grew = file.into_inner().read(&mut [0u8]).map_err(io)? > 0;
    if bytes.len() != len || grew {
        return Err(fail(
            label,
            "the file changed size while it was read: write it completely before comparing",
        ));
    }
    Ok(bytes)
}

/// Read tensors by content and extension: `.npy` (one) or `.safetensors`
/// (all). Only regular files are read (a FIFO or a directory is an error);
/// the file is read once and its tensors share that buffer.
pub fn read_tensors(path: &Path) -> Result<Vec<Tensor>, IngestError> {
    let label = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str());
    let bytes = read_file(path, &label)?;
    if bytes.starts_with(NPY_MAGIC) || ext == Some("npy") {
        Ok(vec![npy_tensor(Arc::new(bytes), &label)?])
    } else if ext == Some("safetensors") {
        safetensors_tensors(Arc::new(bytes), &label)
    } else {
        Err(fail(&label, "expected a .npy or .safetensors file"))
    }
}

/// Test helper and exporter: a little-endian C-order `.npy` v1 file.
pub fn npy_bytes(dtype_descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape_text = match shape {
        [one] => format!("({one},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header =
        format!("{{'descr': '{dtype_descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Test helper and exporter: a `.safetensors` file from its JSON header and
/// data section.
pub fn safetensors_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A `.npy` v1 file with `header` as its dict, padded as numpy does.
    fn npy_with_header(header: &str, data: &[u8]) -> Vec<u8> {
        // Padded as numpy does: the data starts at a multiple of 64.
        let pad = (64 - (10 + header.len() + 1) % 64) % 64;
        let h = format!("{header}{}\n", " ".repeat(pad));
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    /// A `.npy` v3 file (UTF-8 header) with `header` as its dict.
    fn npy3_with_header(header: &str, data: &[u8]) -> Vec<u8> {
        let h = format!("{header}\n");
        let mut out = b"\x93NUMPY\x03\x00".to_vec();
        out.extend_from_slice(&(h.len() as u32).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn err<T: fmt::Debug, E: fmt::Display>(r: Result<T, E>) -> String {
        let s = r.expect_err("an error").to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    }

    #[test]
    fn npy_round_trip() {
        let data = f32s(&[1.5, -2.0, 3.25, 0.0]);
        let t = parse_npy(&npy_bytes("<f4", &[2, 2], &data), "out.npy").unwrap();
        assert_eq!(t.name, "out");
        assert_eq!(t.shape, vec![2, 2]);
        assert_eq!(t.dtype, DType::F32);
        assert_eq!(t.format, TensorFormat::Npy);
        assert_eq!(t.values().collect::<Vec<_>>(), vec![1.5, -2.0, 3.25, 0.0]);
        assert_eq!(t.get(1), Some(Scalar::Float(-2.0)));
        assert_eq!(t.get(4), None);
        let e = err(parse_npy(&npy_bytes("<f4", &[8], &data), "cut.npy"));
        assert!(e.contains("truncated"), "{e}");
        let mut long = npy_bytes("<f4", &[2, 2], &data);
        long.push(0);
        let e = err(parse_npy(&long, "long.npy"));
        assert!(e.contains("bytes after the data"), "{e}");
    }

    #[test]
    fn npy_big_endian_integers_and_bool() {
        let t = parse_npy(
            &npy_with_header(
                "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
                &[0, 0, 1, 0, 0xff, 0xff, 0xff, 0xfe],
            ),
            "b.npy",
        )
        .unwrap();
        assert_eq!(t.byte_order, ByteOrder::Big);
        assert_eq!(
            t.scalars().collect::<Vec<_>>(),
            vec![Scalar::Int(256), Scalar::Int(-2)]
        );
        let t = parse_npy(&npy_bytes("|b1", &[3], &[0, 1, 7]), "m.npy").unwrap();
        assert_eq!(t.values().collect::<Vec<_>>(), vec![0.0, 1.0, 1.0]);
        let t = parse_npy(&npy_bytes("<i8", &[1], &i64::MAX.to_le_bytes()), "big.npy").unwrap();
        assert_eq!(t.get(0), Some(Scalar::Int(i64::MAX)));
        // A scalar: shape (), one element.
        let t = parse_npy(
            &npy_with_header(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                &2.5f64.to_le_bytes(),
            ),
            "s.npy",
        )
        .unwrap();
        assert_eq!((t.shape.len(), t.len()), (0, 1));
    }

    #[test]
    fn npy_descr_empty_or_multibyte_is_an_error_not_a_panic() {
        for descr in ["", "é4", "€", "<", "<é"] {
            let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}");
            for file in [
                npy_with_header(&header, &[0; 4]),
                npy3_with_header(&header, &[0; 4]),
            ] {
                let e = err(parse_npy(&file, "d.npy"));
                assert!(e.starts_with("d.npy: dtype '"), "{descr:?}: {e}");
                assert!(e.contains("is not supported"), "{e}");
            }
        }
        // The UTF-8 header of version 3 echoes the descr as written.
        let e = err(parse_npy(
            &npy3_with_header(
                "{'descr': 'é4', 'fortran_order': False, 'shape': (1,), }",
                &[0; 4],
            ),
            "d.npy",
        ));
        assert!(e.contains("dtype 'é4'"), "{e}");
    }

    #[test]
    fn npy_invalid_dimensions_are_errors() {
        for (shape, bad) in [("(-1,)", "-1"), ("(x, 2)", "x"), ("(2, 3.5)", "3.5")] {
            let file = npy_with_header(
                &format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"),
                &[0; 4],
            );
            let e = err(parse_npy(&file, "d.npy"));
            assert!(
                e.contains(&format!(
                    "shape entry '{bad}' is not a non-negative integer"
                )),
                "{shape}: {e}"
            );
        }
        // 2^62 x 4 elements of f32 overflow: an error, not 0 bytes.
        let file = npy_with_header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
            &[],
        );
        let e = err(parse_npy(&file, "o.npy"));
        assert!(e.contains("overflows"), "{e}");
    }

    #[test]
    fn npy_headers_that_are_not_dicts_are_errors() {
        for header in [
            "",
            "{",
            "{'descr': '<f4', 'shape': (1,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,)}",
            "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x",
            "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}",
        ] {
            let e = err(parse_npy(&npy_with_header(header, &[0; 4]), "h.npy"));
            assert!(e.starts_with("h.npy: "), "{header}: {e}");
        }
        // Fortran order of a 2-D array is refused, of a vector accepted.
        let f = |shape: &str, n: usize| {
            npy_with_header(
                &format!("{{'descr': '<f4', 'fortran_order': True, 'shape': {shape}, }}"),
                &vec![0; n * 4],
            )
        };
        assert!(err(parse_npy(&f("(2, 2)", 4), "f.npy")).contains("Fortran"));
        assert_eq!(parse_npy(&f("(1, 3)", 3), "f.npy").unwrap().len(), 3);
    }

    #[test]
    fn no_prefix_or_byte_change_of_an_npy_panics() {
        let file = npy_bytes("<f2", &[2, 3], &[0x3c; 12]);
        for end in 0..file.len() {
            let _ = parse_npy(&file[..end], "p.npy");
        }
        for at in 0..file.len() {
            for b in [0u8, b'(', b')', b'\'', b',', b'-', 0xc3, 0xff, b'9'] {
                let mut m = file.clone();
                m[at] = b;
                if let Ok(t) = parse_npy(&m, "p.npy") {
                    assert_eq!(Some(t.len()), element_count(&t.shape));
                }
            }
        }
    }

    #[test]
    fn tensor_new_checks_the_byte_count() {
        let e = err(Tensor::new(
            "t",
            DType::F32,
            vec![2],
            ByteOrder::Little,
            vec![0; 7],
        ));
        assert!(
            e.contains("7 bytes for shape [2] of f32, which needs 8"),
            "{e}"
        );
        let e = err(Tensor::new(
            "t",
            DType::F32,
            vec![1 << 62, 4],
            ByteOrder::Little,
            Vec::new(),
        ));
        assert!(e.contains("overflows"), "{e}");
    }

    fn st(header: &str, data: &[u8]) -> Result<Vec<Tensor>, IngestError> {
        parse_safetensors(&safetensors_bytes(header, data), "o.safetensors")
    }

    #[test]
    fn safetensors_with_bf16() {
        let vals: Vec<u8> = [0x3f80u16, 0xc000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let header =
            r#"{"y":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"__metadata__":{"k":"v"}}"#;
        let file = safetensors_bytes(header, &vals);
        let t = parse_safetensors(&file, "o.safetensors").unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name, "y");
        assert_eq!(t[0].format, TensorFormat::Safetensors);
        assert_eq!(t[0].values().collect::<Vec<_>>(), vec![1.0, -2.0]);
        assert!(parse_safetensors(&file[..file.len() - 1], "o.safetensors").is_err());
    }

    #[test]
    fn safetensors_tensors_share_one_buffer_in_name_order() {
        let data = f32s(&[1.0, 2.0, 3.0]);
        let t = st(
            r#"{"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},
                "a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
            &data,
        )
        .unwrap();
        assert_eq!(t[0].name, "a");
        assert_eq!(t[0].values().collect::<Vec<_>>(), vec![2.0, 3.0]);
        assert_eq!(t[1].values().collect::<Vec<_>>(), vec![1.0]);
        assert!(t[0].shares_buffer(&t[1]));
    }

    #[test]
    fn safetensors_short_data_offsets_are_errors_not_panics() {
        for offs in ["[]", "[0]", "[0,4,8]", "[-1,4]", "[\"0\",4]", "{}", "4"] {
            let e = err(st(
                &format!(r#"{{"t":{{"dtype":"F32","shape":[1],"data_offsets":{offs}}}}}"#),
                &[0; 4],
            ));
            assert!(
                e.contains("tensor 't': data_offsets must be [begin, end]"),
                "{offs}: {e}"
            );
        }
    }

    #[test]
    fn safetensors_empty_header_holds_nothing() {
        assert!(st("{}", &[]).unwrap().is_empty());
        // Data that no tensor claims is refused.
        assert!(err(st("{}", &[1, 2])).contains("belongs to no tensor"));
    }

    #[test]
    fn safetensors_overflowing_shape_is_an_error() {
        let e = err(st(
            r#"{"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}"#,
            &[],
        ));
        assert!(e.contains("tensor 't'") && e.contains("overflows"), "{e}");
    }

    #[test]
    fn safetensors_invalid_dimensions_are_errors_naming_the_tensor() {
        for (dim, shown) in [
            ("-1", "-1"),
            ("\"x\"", "\"x\""),
            ("1.5", "1.5"),
            ("null", "null"),
        ] {
            let e = err(st(
                &format!(r#"{{"w":{{"dtype":"F32","shape":[{dim},1],"data_offsets":[0,4]}}}}"#),
                &[0; 4],
            ));
            assert!(
                e.contains(&format!(
                    "tensor 'w': shape entry {shown} is not a non-negative integer"
                )),
                "{dim}: {e}"
            );
        }
        assert!(
            err(st(r#"{"w":{"dtype":"F32","data_offsets":[0,4]}}"#, &[0; 4])).contains("no shape")
        );
    }

    #[test]
    fn safetensors_offsets_are_checked() {
        let h = |a: &str, b: &str| {
            format!(
                r#"{{"a":{{"dtype":"F32","shape":[2],"data_offsets":{a}}},"b":{{"dtype":"F32","shape":[2],"data_offsets":{b}}}}}"#
            )
        };
        // Overlapping.
        let e = err(st(&h("[0,8]", "[4,12]"), &[0; 12]));
        assert!(e.contains("'a' and 'b' overlap"), "{e}");
        let e = err(st(&h("[0,8]", "[0,8]"), &[0; 8]));
        assert!(e.contains("overlap"), "{e}");
        // Out of bounds.
        let e = err(st(&h("[0,8]", "[8,16]"), &[0; 12]));
        assert!(
            e.contains("tensor 'b': data 8..16 lies past the end"),
            "{e}"
        );
        let e = err(st(
            &h("[0,8]", "[18446744073709551607,18446744073709551615]"),
            &[0; 8],
        ));
        assert!(e.contains("tensor 'b'"), "{e}");
        // Not the size of the shape.
        let e = err(st(&h("[0,8]", "[8,12]"), &[0; 12]));
        assert!(
            e.contains(
                "tensor 'b': data_offsets [8, 12] hold 4 bytes, and shape [2] of f32 needs 8"
            ),
            "{e}"
        );
        // Backwards.
        let e = err(st(&h("[0,8]", "[16,8]"), &[0; 16]));
        assert!(e.contains("end before they begin"), "{e}");
        // A hole.
        let e = err(st(&h("[0,8]", "[12,20]"), &[0; 20]));
        assert!(e.contains("belongs to no tensor"), "{e}");
        // Listed twice.
        let e = err(st(
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
            &[0; 8],
        ));
        assert!(e.contains("tensor 'a' is listed twice"), "{e}");
        // Empty tensors may sit anywhere in the data.
        let t = st(
            r#"{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"c":{"dtype":"U8","shape":[0,3],"data_offsets":[0,0]}}"#,
            &[0; 4],
        )
        .unwrap();
        assert_eq!(t.iter().map(Tensor::len).collect::<Vec<_>>(), vec![0, 1, 0]);
    }

    #[test]
    fn safetensors_header_length_is_checked() {
        let mut file = u64::MAX.to_le_bytes().to_vec();
        file.extend_from_slice(b"{}");
        let e = err(parse_safetensors(&file, "h.safetensors"));
        assert!(
            e.contains("header is 18446744073709551615 bytes long"),
            "{e}"
        );
        assert!(err(parse_safetensors(b"abc", "h.safetensors")).contains("shorter than"));
        assert!(err(st("[1]", &[])).contains("JSON header is invalid"));
    }

    #[test]
    fn a_header_past_the_entry_cap_is_refused_as_it_is_read() {
        let mut header = String::from("{");
        for i in 0..=MAX_SAFETENSORS_ENTRIES {
            header.push_str(&format!(r#""t{i}":{{}},"#));
        }
        header.push_str(r#""z":{}}"#);
        let e = err(st(&header, &[]));
        assert!(e.contains("more than 100000 entries"), "{e}");
    }

    #[test]
    fn no_prefix_or_byte_change_of_a_safetensors_panics() {
        let file = safetensors_bytes(
            r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[1,2],"data_offsets":[4,6]}}"#,
            &[1, 2, 3, 4, 5, 6],
        );
        for end in 0..file.len() {
            let _ = parse_safetensors(&file[..end], "p.safetensors");
        }
        for at in 0..file.len() {
            for b in [0u8, b'[', b']', b'"', b',', b'-', b'9', 0xc3, 0xff] {
                let mut m = file.clone();
                m[at] = b;
                if let Ok(ts) = parse_safetensors(&m, "p.safetensors") {
                    for t in ts {
                        assert_eq!(Some(t.len()), element_count(&t.shape));
                    }
                }
            }
        }
    }

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo runs");
        assert!(status.success(), "mkfifo {}", path.display());
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.npy");
        mkfifo(&fifo);
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_tensors(&p).map(|t| t.len()));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("read_tensors returned instead of blocking on the FIFO");
        assert_eq!(
            err(r),
            format!("{}: not a regular file (a FIFO)", fifo.display())
        );
        let sub = dir.path().join("dir.safetensors");
        std::fs::create_dir(&sub).unwrap();
        assert_eq!(
            err(read_tensors(&sub)),
            format!("{}: not a regular file (a directory)", sub.display())
        );
    }

    #[test]
    fn read_tensors_reads_both_formats() {
        let dir = tempfile::tempdir().unwrap();
        let n = dir.path().join("r.npy");
        std::fs::write(&n, npy_bytes("<f4", &[2], &f32s(&[1.0, 2.0]))).unwrap();
        let t = read_tensors(&n).unwrap();
        assert_eq!((t.len(), t[0].name.as_str(), t[0].len()), (1, "r", 2));
        let s = dir.path().join("c.safetensors");
        std::fs::write(
            &s,
            safetensors_bytes(
                r#"{"r":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
                &f32s(&[1.0, 2.0]),
            ),
        )
        .unwrap();
        assert_eq!(read_tensors(&s).unwrap()[0].values().sum::<f64>(), 3.0);
        let other = dir.path().join("x.bin");
        std::fs::write(&other, b"hello").unwrap();
        assert!(err(read_tensors(&other)).contains("expected a .npy or .safetensors file"));
        let junk = dir.path().join("junk.npy");
        std::fs::write(&junk, b"hello").unwrap();
        assert!(err(read_tensors(&junk)).contains("not a .npy file"));
    }
}
