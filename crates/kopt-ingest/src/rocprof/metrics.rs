//! AMD counters to kopt's metrics, with rocprof-compute's published formulas
//! (gfx942 `0200_system-speed-of-light.yaml`: HBM read / write bytes from the
//! L2-fabric requests, L2 hit rate, VALU / MFMA / LDS utilisation against
//! GRBM_GUI_ACTIVE per XCD, LDS bank conflicts per access, wavefront
//! occupancy from SQ_LEVEL_WAVES' accumulation).

use kopt_model::{Device, Metrics};

use super::Dispatch;

/// The device figures the formulas need.
pub(crate) struct Model {
    cus: Option<f64>,
    sclk_hz: Option<f64>,
    xcds: f64,
    max_waves_per_cu: Option<f64>,
    l2_channels: Option<f64>,
    line: f64,
    wave: f64,
    dram_peak: Option<f64>,
    fp32_peak: Option<f64>,
}

impl Model {
    pub fn of(d: &Device) -> Model {
        let amd = d.amd.clone().unwrap_or_default();
        Model {
            cus: d.sm_count.map(f64::from),
            sclk_hz: d.sm_clock_hz,
            xcds: amd.xcds.unwrap_or(1).max(1) as f64,
            max_waves_per_cu: amd.max_waves_per_cu.map(f64::from),
            l2_channels: amd.l2_channels.map(f64::from),
            line: amd.vl1d_bytes_per_clock.unwrap_or(64) as f64,
            wave: if amd.wave_size > 0 {
                amd.wave_size as f64
            } else {
                64.0
            },
            dram_peak: d.peaks.dram_bytes_per_s,
            fp32_peak: d.peaks.fp32_flops,
        }
    }
}

/// A positive finite ratio, else `None`.
fn ratio(num: f64, den: f64) -> Option<f64> {
    let r = num / den;
    (den > 0.0 && r.is_finite()).then_some(r)
}

/// Work-groups in the grid (rocprof reports the grid in work-items).
pub(crate) fn workgroups(d: &Dispatch) -> [u64; 3] {
    std::array::from_fn(|k| d.grid[k].div_ceil(d.workgroup[k].max(1)).max(1))
}

/// A counter-collection dispatch's duration from GRBM_GUI_ACTIVE (busy
/// cycles, counted on each XCD) at SCLK, for when its timestamps are
/// unusable (a rocprof-compute folder saved through a spreadsheet rounds
/// them to 5 digits, start = end). None without the counter or the clock.
pub(crate) fn grbm_duration_ns(d: &Dispatch, m: &Model) -> Option<f64> {
    let cycles = d.counter("GRBM_GUI_ACTIVE")?;
    let sclk = m.sclk_hz?;
    ratio(cycles / m.xcds, sclk).map(|s| s * 1e9)
}

pub(crate) fn metrics(d: &Dispatch, m: &Model) -> Metrics {
    let c = |name: &str| d.counter(name);
    let duration = match (d.start_ns, d.end_ns) {
        (Some(s), Some(e)) if e > s => Some((e - s) as f64),
        _ => grbm_duration_ns(d, m),
    };
    let wg = workgroups(d);
    let mut out = Metrics {
        duration_ns: duration,
        grid_size: Some(wg.iter().map(|&v| v as f64).product()),
        block_size: Some(d.workgroup.iter().map(|&v| v as f64).product()),
        sm_count: m.cus,
        registers_per_thread: d.arch_vgpr,
        shared_mem_static: d.lds_bytes,
        wavefront_size: Some(d.wave_size.unwrap_or(m.wave)),
        ..Metrics::default()
    };

    // HBM traffic: rocprof's FETCH_SIZE / WRITE_SIZE (KiB), else the
    // L2-fabric request counters (gfx942 names TCC_EA0_*, gfx90a TCC_EA_*).
    let read = c("FETCH_SIZE").map(|kib| kib * 1024.0).or_else(|| {
        let (rd, r32, bubble) = match c("TCC_EA0_RDREQ_sum") {
            Some(rd) => (rd, c("TCC_EA0_RDREQ_32B_sum"), c("TCC_BUBBLE_sum")),
            None => (c("TCC_EA_RDREQ_sum")?, c("TCC_EA_RDREQ_32B_sum"), None),
        };
        let (r32, bubble) = (r32.unwrap_or(0.0), bubble.unwrap_or(0.0));
        Some(128.0 * bubble + 64.0 * (rd - bubble - r32) + 32.0 * r32)
    });
    let write = c("WRITE_SIZE").map(|kib| kib * 1024.0).or_else(|| {
        let (wr, w64) = match c("TCC_EA0_WRREQ_sum") {
            Some(wr) => (wr, c("TCC_EA0_WRREQ_64B_sum")),
            None => (c("TCC_EA_WRREQ_sum")?, c("TCC_EA_WRREQ_64B_sum")),
        };
        let w64 = w64.unwrap_or(wr);
        Some(64.0 * w64 + 32.0 * (wr - w64))
    });
    out.dram_bytes_read = read.map(|v| v.max(0.0));
    out.dram_bytes_write = write.map(|v| v.max(0.0));
    let bytes = match (out.dram_bytes_read, out.dram_bytes_write) {
        (None, None) => None,
        (r, w) => Some(r.unwrap_or(0.0) + w.unwrap_or(0.0)),
    };
    if let (Some(b), Some(ns)) = (bytes, duration) {
        let rate = b / (ns * 1e-9);
        out.dram_bytes_per_s = Some(rate);
        out.dram_pct = m.dram_peak.and_then(|p| ratio(100.0 * rate, p));
    }

    // L2: hit rate, and bandwidth against 128 bytes per clock per channel.
    if let (Some(hit), Some(miss)) = (c("TCC_HIT_sum"), c("TCC_MISS_sum")) {
        out.l2_hit_pct = ratio(100.0 * hit, hit + miss);
    }
    let l2_bytes = c("TCC_REQ_sum").map(|r| r * 128.0).or_else(|| {
        let r = c("TCP_TCC_READ_REQ_sum")?;
        Some((r + c("TCP_TCC_WRITE_REQ_sum").unwrap_or(0.0)) * m.line)
    });
    if let (Some(b), Some(ns), Some(clk), Some(ch)) = (l2_bytes, duration, m.sclk_hz, m.l2_channels)
    {
        out.l2_pct = ratio(100.0 * b / (ns * 1e-9), clk * 128.0 * ch);
    }
    // vL1D: one cache line per CU per clock.
    if let (Some(acc), Some(ns), Some(clk), Some(cus)) = (
        c("TCP_TOTAL_CACHE_ACCESSES_sum"),
        duration,
        m.sclk_hz,
        m.cus,
    ) {
        out.l1_pct = ratio(100.0 * acc, ns * 1e-9 * clk * cus);
    }

    // Pipe utilisation against GRBM_GUI_ACTIVE per XCD x CUs.
    if let (Some(gui), Some(cus)) = (c("GRBM_GUI_ACTIVE"), m.cus) {
        let cycles = gui / m.xcds * cus;
        out.valu_pct = c("SQ_ACTIVE_INST_VALU").and_then(|v| ratio(100.0 * v, cycles));
        out.mfma_pct = c("SQ_VALU_MFMA_BUSY_CYCLES").and_then(|v| ratio(100.0 * v, 4.0 * cycles));
        out.lds_pct = c("SQ_LDS_IDX_ACTIVE").and_then(|v| ratio(100.0 * v, cycles));
    }
    out.alu_pct = out.valu_pct;
    out.tensor_pct = out.mfma_pct;
    out.sm_pct = match (out.valu_pct, out.mfma_pct) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0).max(b.unwrap_or(0.0))),
    };

    // Occupancy: the SQ_LEVEL_WAVES pass's accumulation over its own GRBM_GUI_ACTIVE.
    let level = (
        c("SQ_ACCUM_PREV_HIRES@SQ_LEVEL_WAVES"),
        c("GRBM_GUI_ACTIVE@SQ_LEVEL_WAVES").or(c("GRBM_GUI_ACTIVE")),
    );
    if let ((Some(acc), Some(gui)), Some(w), Some(cus)) = (level, m.max_waves_per_cu, m.cus) {
        out.occupancy_achieved_pct = ratio(100.0 * acc, gui / m.xcds * w * cus);
    }

    // LDS bank conflicts: conflict cycles among LDS-active cycles.
    if let (Some(conf), Some(active)) = (c("SQ_LDS_BANK_CONFLICT"), c("SQ_LDS_IDX_ACTIVE")) {
        if active > 0.0 {
            out.shared_ld_conflicts = Some(conf);
            out.shared_ld_wavefronts = Some(active);
            out.lds_bank_conflicts_per_access = ratio(conf, active - conf);
        }
    }

    // FLOPs: VALU (64 lanes; FMA counts two) plus MFMA MOPs x 512.
    let valu_ops = ["F16", "F32", "F64"]
        .iter()
        .try_fold(None, |acc: Option<f64>, p| {
            let n = |op: &str| c(&format!("SQ_INSTS_VALU_{op}_{p}"));
            let parts = [n("ADD"), n("MUL"), n("TRANS"), n("FMA").map(|f| 2.0 * f)];
            let s: Option<f64> = parts.iter().flatten().copied().reduce(|a, b| a + b);
            Some(match (acc, s) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            })
        });
    if let Some(Some(valu)) = valu_ops {
        let mfma: f64 = ["F8", "F16", "BF16", "F32", "F64"]
            .iter()
            .filter_map(|p| c(&format!("SQ_INSTS_VALU_MFMA_MOPS_{p}")))
            .sum();
        out.flops = Some(64.0 * valu + 512.0 * mfma);
        out.ridge_flop_per_byte = match (m.fp32_peak, m.dram_peak) {
            (Some(f), Some(b)) => ratio(f, b),
            _ => None,
        };
    }
    out
}
