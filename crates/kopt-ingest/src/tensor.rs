//! Tensors for the correctness gate: NumPy `.npy` and `.safetensors` files
//! (bf16 arrives through safetensors). Values are widened to f64.

use std::path::Path;

use crate::IngestError;

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

    fn size(self) -> usize {
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

/// One named tensor, values widened to f64.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub values: Vec<f64>,
}

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

fn decode(dtype: DType, data: &[u8], big_endian: bool) -> Vec<f64> {
    let n = dtype.size();
    data.chunks_exact(n)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(c);
            if big_endian {
                b[..n].reverse();
            }
            match dtype {
                DType::F64 => f64::from_le_bytes(b),
                DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                DType::F16 => f16_to_f64(u16::from_le_bytes([b[0], b[1]])),
                DType::BF16 => {
                    f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16) as f64
                }
                DType::I64 => i64::from_le_bytes(b) as f64,
                DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
                DType::I8 => b[0] as i8 as f64,
                DType::U8 | DType::Bool => b[0] as f64,
            }
        })
        .collect()
}

fn fail(path: &str, message: impl Into<String>) -> IngestError {
    IngestError::Format {
        path: path.into(),
        message: message.into(),
    }
}

/// A `.npy` file (format versions 1-3, C order).
pub fn parse_npy(bytes: &[u8], path: &str) -> Result<Tensor, IngestError> {
    if !bytes.starts_with(b"\x93NUMPY") || bytes.len() < 10 {
        return Err(fail(path, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(fail(path, format!("unsupported .npy version {v}"))),
    };
    let header = bytes
        .get(start..start + len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| fail(path, "truncated .npy header"))?;
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}':"))? + key.len() + 3;
        Some(header[at..].trim_start())
    };
    let descr = field("descr")
        .and_then(|d| d.strip_prefix('\''))
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| fail(path, "byte 8: .npy header has no 'descr'"))?;
    if field("fortran_order").is_some_and(|f| f.starts_with("True")) {
        return Err(fail(
            path,
            "Fortran-order arrays are not supported: save with np.ascontiguousarray",
        ));
    }
    let shape_text = field("shape")
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| fail(path, ".npy header has no 'shape'"))?;
    let shape: Vec<usize> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| fail(path, format!("bad shape entry {s:?}")))
        })
        .collect::<Result<_, _>>()?;
    let (order, code) = descr.split_at(1);
    let dtype = match code {
        "f8" => DType::F64,
        "f4" => DType::F32,
        "f2" => DType::F16,
        "i8" => DType::I64,
        "i4" => DType::I32,
        "i2" => DType::I16,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "b1" => DType::Bool,
        other => {
            return Err(fail(
                path,
                format!("dtype {other:?} is not supported (bf16: save as .safetensors)"),
            ))
        }
    };
    let count: usize = shape.iter().product();
    let data_start = start + len;
    let data = bytes
        .get(data_start..data_start + count * dtype.size())
        .ok_or_else(|| {
            fail(
                path,
                format!(
                    "truncated: {count} elements of {} expected after byte {data_start}",
                    dtype.name()
                ),
            )
        })?;
    Ok(Tensor {
        name: Path::new(path)
            .file_stem()
            .map_or("tensor".into(), |s| s.to_string_lossy().into_owned()),
        dtype,
        shape,
        values: decode(dtype, data, order == ">"),
    })
}

/// Every tensor of a `.safetensors` file, in name order.
pub fn parse_safetensors(bytes: &[u8], path: &str) -> Result<Vec<Tensor>, IngestError> {
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
        .ok_or_else(|| {
            fail(
                path,
                "not a .safetensors file (shorter than its 8-byte header length)",
            )
        })?;
    let header: serde_json::Value = bytes
        .get(8..8 + n)
        .and_then(|h| serde_json::from_slice(h).ok())
        .ok_or_else(|| {
            fail(
                path,
                "byte 8: the .safetensors JSON header is missing or invalid",
            )
        })?;
    let map = header
        .as_object()
        .ok_or_else(|| fail(path, "the .safetensors header is not an object"))?;
    let data = &bytes[8 + n..];
    let mut out = Vec::new();
    for (name, info) in map.iter().filter(|(k, _)| k.as_str() != "__metadata__") {
        let dtype = match info["dtype"].as_str().unwrap_or("") {
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
            other => {
                return Err(fail(
                    path,
                    format!("tensor {name}: dtype {other:?} is not supported"),
                ))
            }
        };
        let shape: Vec<usize> = info["shape"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|d| d.as_u64().map(|d| d as usize))
                    .collect()
            })
            .unwrap_or_default();
        let offs = info["data_offsets"]
            .as_array()
            .ok_or_else(|| fail(path, format!("tensor {name}: no data_offsets")))?;
        let (b, e) = (
            offs[0].as_u64().unwrap_or(0) as usize,
            offs[1].as_u64().unwrap_or(0) as usize,
        );
        let raw = data.get(b..e).ok_or_else(|| {
            fail(
                path,
                format!("tensor {name}: data {b}..{e} lies past the end of the file (truncated?)"),
            )
        })?;
        if raw.len() != shape.iter().product::<usize>() * dtype.size() {
            return Err(fail(
                path,
                format!(
                    "tensor {name}: {} bytes for shape {shape:?} of {}",
                    raw.len(),
                    dtype.name()
                ),
            ));
        }
        out.push(Tensor {
            name: name.clone(),
            dtype,
            shape,
            values: decode(dtype, raw, false),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Read tensors by extension: `.npy` (one) or `.safetensors` (all).
pub fn read_tensors(path: &Path) -> Result<Vec<Tensor>, IngestError> {
    let label = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| IngestError::Io {
        path: label.clone(),
        source,
    })?;
    if bytes.starts_with(b"\x93NUMPY") {
        Ok(vec![parse_npy(&bytes, &label)?])
    } else if path.extension().is_some_and(|e| e == "safetensors") {
        parse_safetensors(&bytes, &label)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip() {
        let data: Vec<u8> = [1.5f32, -2.0, 3.25, 0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t = parse_npy(&npy_bytes("<f4", &[2, 2], &data), "out.npy").unwrap();
        assert_eq!(t.shape, vec![2, 2]);
        assert_eq!(t.dtype, DType::F32);
        assert_eq!(t.values, vec![1.5, -2.0, 3.25, 0.0]);
        let e = parse_npy(&npy_bytes("<f4", &[8], &data), "cut.npy")
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn half_precisions() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert!(f16_to_f64(0x7e00).is_nan());
        assert_eq!(
            decode(DType::BF16, &0x3f80u16.to_le_bytes(), false),
            vec![1.0]
        );
    }

    #[test]
    fn safetensors_with_bf16() {
        let vals: Vec<u8> = [0x3f80u16, 0xc000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let header =
            r#"{"y":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"__metadata__":{"k":"v"}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&vals);
        let t = parse_safetensors(&file, "o.safetensors").unwrap();
        assert_eq!(t[0].name, "y");
        assert_eq!(t[0].values, vec![1.0, -2.0]);
        assert!(parse_safetensors(&file[..file.len() - 1], "o.safetensors").is_err());
    }
}
