//! What a communication kernel's name says: NCCL and RCCL name their
//! kernels `ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)` (NCCL 2.19+) or
//! `ncclKernel_AllReduce_RING_LL_Sum_float(...)` (older): the op, the
//! element type, the algorithm and the protocol.

use kopt_model::CollectiveOp;

/// True for a kernel of the collective library (HTA's test: the name
/// holds `nccl`; RCCL keeps NCCL's names).
pub fn is_comm_kernel(name: &str) -> bool {
    name.get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("nccl"))
        || name.contains("nccl")
        || name.contains("rccl")
}

/// A communication kernel's name, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelName {
    pub op: CollectiveOp,
    /// `f32`, `bf16`, ... normalised; None when the name has none.
    pub dtype: Option<&'static str>,
    /// `RING_LL`, `TREE_SIMPLE`, ...
    pub algorithm: Option<String>,
}

fn op_of(token: &str) -> Option<CollectiveOp> {
    Some(match token {
        "AllReduce" => CollectiveOp::AllReduce,
        "ReduceScatter" => CollectiveOp::ReduceScatter,
        "AllGather" => CollectiveOp::AllGather,
        "Broadcast" => CollectiveOp::Broadcast,
        "Reduce" => CollectiveOp::Reduce,
        "AllToAll" | "AlltoAll" => CollectiveOp::AllToAll,
        "SendRecv" | "Send" | "Recv" => CollectiveOp::SendRecv,
        _ => return None,
    })
}

fn dtype_of(token: &str) -> Option<&'static str> {
    Some(match token {
        "f32" | "float" => "f32",
        "f16" | "half" => "f16",
        "bf16" | "__nv_bfloat16" | "bfloat16" | "hip_bfloat16" => "bf16",
        "f64" | "double" => "f64",
        "i8" | "int8" | "int8_t" | "char" => "i8",
        "u8" | "uint8" | "uint8_t" => "u8",
        "i32" | "int32" | "int32_t" | "int" => "i32",
        "u32" | "uint32" | "uint32_t" => "u32",
        "i64" | "int64" | "int64_t" | "long" => "i64",
        "u64" | "uint64" | "uint64_t" => "u64",
        "f8e4m3" | "f8e5m2" => "f8",
        _ => return None,
    })
}

const ALGORITHMS: &[&str] = &[
    "RING",
    "TREE",
    "COLLNET",
    "COLLNETDIRECT",
    "COLLNETCHAIN",
    "NVLS",
    "NVLSTREE",
    "PAT",
];
const PROTOCOLS: &[&str] = &["LL", "LL128", "SIMPLE"];

/// The op, element type and algorithm a communication kernel's name
/// gives; a name of the library that names no op is `Other`.
pub fn parse(name: &str) -> KernelName {
    let base = name.split('(').next().unwrap_or(name);
    let mut out = KernelName {
        op: CollectiveOp::Other,
        dtype: None,
        algorithm: None,
    };
    let (mut algo, mut proto) = (None, None);
    for token in base.split('_') {
        if out.op == CollectiveOp::Other {
            if let Some(op) = op_of(token) {
                out.op = op;
                continue;
            }
        }
        if out.dtype.is_none() {
            if let Some(d) = dtype_of(token) {
                out.dtype = Some(d);
                continue;
            }
        }
        if algo.is_none() && ALGORITHMS.contains(&token) {
            algo = Some(token);
        } else if proto.is_none() && PROTOCOLS.contains(&token) {
            proto = Some(token);
        }
    }
    out.algorithm = match (algo, proto) {
        (Some(a), Some(p)) => Some(format!("{a}_{p}")),
        (Some(a), None) => Some(a.to_string()),
        (None, Some(p)) => Some(p.to_string()),
        (None, None) => None,
    };
    out
}

/// nccl-tests' bus-bandwidth factor: the share of the message each rank's
/// link carries, so that figures compare across ops and rank counts.
pub fn bus_factor(op: CollectiveOp, ranks: u32) -> f64 {
    let n = f64::from(ranks.max(1));
    match op {
        CollectiveOp::AllReduce => 2.0 * (n - 1.0) / n,
        CollectiveOp::ReduceScatter | CollectiveOp::AllGather | CollectiveOp::AllToAll => {
            (n - 1.0) / n
        }
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_naming_schemes_read() {
        let new =
            parse("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
        assert_eq!(new.op, CollectiveOp::AllReduce);
        assert_eq!(new.dtype, Some("f32"));
        assert_eq!(new.algorithm.as_deref(), Some("RING_LL"));
        let old = parse(
            "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        );
        assert_eq!(old.op, CollectiveOp::AllGather);
        assert_eq!(old.dtype, Some("i8"));
        let bf = parse("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128(x)");
        assert_eq!(
            (bf.op, bf.dtype),
            (CollectiveOp::ReduceScatter, Some("bf16"))
        );
        assert_eq!(bf.algorithm.as_deref(), Some("RING_LL128"));
        assert_eq!(
            parse("ncclDevKernel_SendRecv(x)").op,
            CollectiveOp::SendRecv
        );
        assert_eq!(parse("ncclDevKernel_Generic_4(x)").op, CollectiveOp::Other);
        assert!(is_comm_kernel("ncclDevKernel_Generic_4(x)"));
        assert!(!is_comm_kernel("ampere_sgemm_128x64_nn"));
    }

    #[test]
    fn bus_factors_follow_nccl_tests() {
        assert_eq!(bus_factor(CollectiveOp::AllReduce, 2), 1.0);
        assert_eq!(bus_factor(CollectiveOp::AllReduce, 8), 1.75);
        assert_eq!(bus_factor(CollectiveOp::AllGather, 4), 0.75);
        assert_eq!(bus_factor(CollectiveOp::Broadcast, 4), 1.0);
    }
}
