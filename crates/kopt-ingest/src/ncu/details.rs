//! The details page: `ncu -i report.ncu-rep --csv --page details`.
//! One row per (launch, section, metric), plus rule rows that carry ncu's
//! own advice (rule name, type, description, estimated speedup).

use std::collections::HashMap;

use kopt_model::{Device, KernelLaunch, Metrics, NcuRule, StallReason};

use super::raw::put;
use super::{check_value, parse_dim3, Ctx, NcuFile, NcuPage, Verdict};
use crate::number::{parse_cell, vote, Cell, NumberStyle};
use crate::units::to_base_factor;
use crate::IngestError;

type Slot = fn(&mut Metrics) -> &mut Option<f64>;

// Which of them a launch has had a row for fits one u64.
const _: () = assert!(DETAIL_METRICS.len() <= 64);

/// (section, metric) -> where kopt keeps it.
const DETAIL_METRICS: &[(&str, &str, Slot)] = &[
    ("GPU Speed Of Light Throughput", "Duration", |m| {
        &mut m.duration_ns
    }),
    ("GPU Speed Of Light Throughput", "SM Frequency", |m| {
        &mut m.sm_clock_hz
    }),
    (
        "GPU Speed Of Light Throughput",
        "Compute (SM) Throughput",
        |m| &mut m.sm_pct,
    ),
    ("GPU Speed Of Light Throughput", "Memory Throughput", |m| {
        &mut m.memory_pct
    }),
    ("GPU Speed Of Light Throughput", "DRAM Throughput", |m| {
        &mut m.dram_pct
    }),
    (
        "GPU Speed Of Light Throughput",
        "L1/TEX Cache Throughput",
        |m| &mut m.l1_pct,
    ),
    (
        "GPU Speed Of Light Throughput",
        "L2 Cache Throughput",
        |m| &mut m.l2_pct,
    ),
    ("Memory Workload Analysis", "Memory Throughput", |m| {
        &mut m.dram_bytes_per_s
    }),
    ("Launch Statistics", "Grid Size", |m| &mut m.grid_size),
    ("Launch Statistics", "Block Size", |m| &mut m.block_size),
    ("Launch Statistics", "Registers Per Thread", |m| {
        &mut m.registers_per_thread
    }),
    ("Launch Statistics", "Static Shared Memory Per Block", |m| {
        &mut m.shared_mem_static
    }),
    (
        "Launch Statistics",
        "Dynamic Shared Memory Per Block",
        |m| &mut m.shared_mem_dynamic,
    ),
    ("Launch Statistics", "Waves Per SM", |m| &mut m.waves_per_sm),
    ("Launch Statistics", "# SMs", |m| &mut m.sm_count),
    ("Compute Workload Analysis", "SM Busy", |m| {
        &mut m.sm_busy_pct
    }),
    (
        "Warp State Statistics",
        "Warp Cycles Per Issued Instruction",
        |m| &mut m.warp_cycles_per_issue,
    ),
    (
        "Warp State Statistics",
        "Avg. Active Threads Per Warp",
        |m| &mut m.active_threads_per_inst,
    ),
    ("Occupancy", "Theoretical Occupancy", |m| {
        &mut m.occupancy_theoretical_pct
    }),
    ("Occupancy", "Achieved Occupancy", |m| {
        &mut m.occupancy_achieved_pct
    }),
    ("Occupancy", "Block Limit SM", |m| {
        &mut m.occupancy_limit_blocks
    }),
    ("Occupancy", "Block Limit Registers", |m| {
        &mut m.occupancy_limit_registers
    }),
    ("Occupancy", "Block Limit Shared Mem", |m| {
        &mut m.occupancy_limit_shared_mem
    }),
    ("Occupancy", "Block Limit Warps", |m| {
        &mut m.occupancy_limit_warps
    }),
];

const REQUIRED: [&str; 6] = [
    "ID",
    "Kernel Name",
    "Section Name",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
];

pub(super) fn parse(
    reader: &mut csv::Reader<&[u8]>,
    columns: &[String],
    ctx: &Ctx,
) -> Result<NcuFile, IngestError> {
    let hint = " (is this `ncu --csv --page details` output?)";
    let mut idx = [0usize; 6];
    for (slot, name) in idx.iter_mut().zip(REQUIRED) {
        *slot = ctx.column(columns, name, hint)?;
    }
    let [id_col, name_col, section_col, metric_col, unit_col, value_col] = idx;
    let find = |name: &str| columns.iter().position(|c| c == name);
    let (grid_col, block_col, stream_col, cc_col) = (
        find("Grid Size"),
        find("Block Size"),
        find("Stream"),
        find("CC"),
    );
    let rule_cols = (
        find("Rule Name"),
        find("Rule Type"),
        find("Rule Description"),
        find("Estimated Speedup Type"),
        find("Estimated Speedup"),
    );
    // Metric rows stop after "Metric Value"; rule rows carry every column.
    let min_width = idx.iter().max().copied().unwrap_or(0) + 1;

    let mut launches: Vec<KernelLaunch> = Vec::new();
    let mut by_id: HashMap<u64, usize> = HashMap::new();
    // Per launch, which of DETAIL_METRICS it has had a row for (one bit
    // each): ncu writes one row per (launch, section, metric).
    let mut rows_seen: Vec<u64> = Vec::new();
    let mut record = csv::ByteRecord::new();
    let mut style = None;
    let mut cc: Option<String> = None;
    let mut first_line = None;
    let mut any_duration = false;
    let mut excluded = Vec::new();

    while reader
        .read_byte_record(&mut record)
        .map_err(|e| ctx.csv_error(e))?
    {
        if record.len() == 1 && record.get(0).is_some_and(|c| c.is_empty()) {
            continue;
        }
        let line = ctx.line_of(&record);
        if record.len() < min_width {
            return Err(IngestError::at(
                ctx.path,
                line,
                format!(
                    "row has {} fields, a details row needs at least {min_width} (file truncated?)",
                    record.len()
                ),
            ));
        }
        first_line.get_or_insert(line);
        let text = |i: usize| -> String {
            String::from_utf8_lossy(record.get(i).unwrap_or_default())
                .trim()
                .to_string()
        };
        let id_text = text(id_col);
        let id: u64 = id_text.parse().map_err(|_| {
            IngestError::at(
                ctx.path,
                line,
                format!(
                    "column \"ID\": expected a launch number, found \"{}\"",
                    crate::echo(&id_text)
                ),
            )
        })?;
        if !by_id.contains_key(&id) {
            ctx.launch_budget(launches.len(), line)?;
        }
        let at = *by_id.entry(id).or_insert_with(|| {
            launches.push(KernelLaunch {
                id,
                name: crate::cap_name(&text(name_col)).0.into_owned(),
                grid: grid_col
                    .and_then(|c| parse_dim3(&text(c)))
                    .unwrap_or_default(),
                block: block_col
                    .and_then(|c| parse_dim3(&text(c)))
                    .unwrap_or_default(),
                stream: stream_col.and_then(|c| text(c).parse().ok()),
                metrics: Metrics::default(),
                ncu_rules: Vec::new(),
            });
            launches.len() - 1
        });
        if cc.is_none() {
            cc = cc_col.map(&text).filter(|s| !s.is_empty());
        }
        let launch = &mut launches[at];
        let rule_name = rule_cols.0.map(&text).unwrap_or_default();
        if !rule_name.is_empty() {
            let rule = NcuRule {
                section: text(section_col),
                name: rule_name,
                kind: rule_cols.1.map(&text).unwrap_or_default(),
                description: rule_cols.2.map(&text).unwrap_or_default(),
                speedup_type: rule_cols.3.map(&text).unwrap_or_default(),
                estimated_speedup_pct: rule_cols.4.map(&text).and_then(|s| s.parse().ok()),
            };
            evidence_from_rule(&rule, &mut launch.metrics);
            launch.ncu_rules.push(rule);
            continue;
        }
        let section = text(section_col);
        let metric = text(metric_col);
        let Some((which, (_, _, slot))) = DETAIL_METRICS
            .iter()
            .enumerate()
            .find(|(_, (s, m, _))| *s == section && *m == metric)
        else {
            continue;
        };
        let value = text(value_col);
        // The style locks on the first value that can only be read one way.
        if style.is_none() {
            style = vote(&value);
        }
        let unit = text(unit_col);
        let style = style.unwrap_or(NumberStyle::DotDecimal);
        let cell = Row {
            ctx,
            line,
            section: &section,
            metric: &metric,
        };
        let Some(v) = cell.value(&value, &unit, style, &mut excluded)? else {
            continue;
        };
        if metric == "Duration" {
            any_duration = true;
        }
        if rows_seen.len() <= at {
            rows_seen.resize(at + 1, 0);
        }
        let bit = 1u64 << which;
        let held = slot(&mut launch.metrics);
        if rows_seen[at] & bit != 0 {
            // A second row for one launch's metric: rows of two captures
            // in one page; kept, the larger silently replaced the other.
            if *held != Some(v) {
                return Err(IngestError::at(
                    ctx.path,
                    line,
                    format!(
                        "a second \"{} / {}\" row for launch ID {id}, with another value ({} against {}): rows of two captures in one page? give each capture its own file",
                        crate::echo(&section),
                        crate::echo(&metric),
                        v,
                        held.map_or("none".to_string(), |h| h.to_string())
                    ),
                ));
            }
            continue;
        }
        rows_seen[at] |= bit;
        put(held, v);
    }
    ctx.require_timed_rows(
        first_line,
        any_duration,
        "header but no rows: the report holds no profiled kernel",
        "no launch has a \"GPU Speed Of Light Throughput / Duration\" value: nothing to rank (collect the SpeedOfLight section)",
    )?;
    let device = device_from_launches(&launches, cc);
    Ok(NcuFile {
        page: NcuPage::Details,
        device: Some(device),
        launches,
        excluded,
    })
}

/// A metric row of the details page: where it is, for messages.
struct Row<'a> {
    ctx: &'a Ctx<'a>,
    line: u64,
    section: &'a str,
    metric: &'a str,
}

impl Row<'_> {
    /// The row's value in base units: None where it is missing or left out
    /// as implausible (said in `excluded`); an error where it cannot be read.
    fn value(
        &self,
        value: &str,
        unit: &str,
        style: NumberStyle,
        excluded: &mut Vec<String>,
    ) -> Result<Option<f64>, IngestError> {
        let (ctx, line, section, metric) = (self.ctx, self.line, self.section, self.metric);
        // A unit kopt does not know would be read as its base unit.
        if !crate::units::is_known(unit) {
            let why = format!("unit \"{}\" unknown to kopt", crate::echo(unit));
            if metric == "Duration" {
                return Err(IngestError::at(
                    ctx.path,
                    line,
                    format!("metric \"{section} / Duration\": {why}: not a time unit"),
                ));
            }
            excluded.push(format!(
                "line {line}: metric \"{} / {}\": {why}: left unknown",
                crate::echo(section),
                crate::echo(metric)
            ));
            return Ok(None);
        }
        let mut cell = parse_cell(value, style);
        if metric == "Duration" {
            let ns = match cell {
                Cell::Value(v) => Some(v * to_base_factor(unit)),
                _ => None,
            };
            if let Err(why) = super::check_duration(value, ns) {
                return Err(IngestError::at(
                    ctx.path,
                    line,
                    format!("metric \"{section} / Duration\": {why}"),
                ));
            }
        }
        if metric != "Duration" {
            let v = match cell {
                Cell::Value(v) => Some(v * to_base_factor(unit)),
                _ => None,
            };
            let field = || {
                format!(
                    "metric \"{} / {}\"",
                    crate::echo(section),
                    crate::echo(metric)
                )
            };
            match check_value(metric, unit, value, v) {
                Verdict::Keep => {}
                Verdict::Cap(v, why) => {
                    excluded.push(format!("line {line}: {}: {why}", field()));
                    cell = Cell::Value(v / to_base_factor(unit));
                }
                Verdict::Exclude(why) => {
                    excluded.push(format!("line {line}: {}: {why}", field()));
                    return Ok(None);
                }
                Verdict::Refuse(why) => {
                    return Err(IngestError::at(
                        ctx.path,
                        line,
                        format!("{}: {why}", field()),
                    ))
                }
            }
        }
        match cell {
            Cell::Value(v) => Ok(Some(v * to_base_factor(unit))),
            Cell::Missing => Ok(None),
            Cell::Invalid => Err(IngestError::at(
                ctx.path,
                line,
                format!(
                    "metric \"{} / {}\": expected a number, found \"{}\"",
                    crate::echo(section),
                    crate::echo(metric),
                    crate::echo(value)
                ),
            )),
        }
    }
}

/// The details page names no device; it gives CC and SM count, and DRAM
/// bandwidth both in bytes/s and in % of peak, which together give the peak.
fn device_from_launches(launches: &[KernelLaunch], cc: Option<String>) -> Device {
    let sm_count = launches
        .iter()
        .find_map(|l| l.metrics.sm_count)
        .map(|v| v as u32);
    let name = "unknown GPU (the details page names no device; pass --device)".to_string();
    let mut device = Device {
        name,
        compute_capability: cc,
        sm_count,
        ..Device::unknown()
    };
    // The busiest launch gives the most precise ratio.
    let dram_peak = launches
        .iter()
        .filter_map(|l| Some((l.metrics.dram_bytes_per_s?, l.metrics.dram_pct?)))
        .filter(|(_, pct)| *pct >= 10.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(rate, pct)| rate / (pct / 100.0));
    device.resolve_peaks();
    if dram_peak.is_some() {
        device.peaks.dram_bytes_per_s = dram_peak;
        device.peak_source = kopt_model::PeakSource::DeviceAttributes;
    }
    device
}

/// ncu's rules carry figures the details page has no metric row for.
fn evidence_from_rule(rule: &NcuRule, m: &mut Metrics) {
    let d = &rule.description;
    match rule.name.as_str() {
        // "... which represent 96.90% of the overall 67641673 wavefronts for shared loads."
        "SharedMemoryConflicts" => {
            if let Some(p) = number_before(d, "% of the overall") {
                put(&mut m.shared_conflict_pct_from_rule, p);
            }
        }
        // "... 65011712 excessive wavefronts (94% of the total 69206016 wavefronts)."
        "UncoalescedSharedAccess" => {
            if let Some(p) = number_before(d, "% of the total") {
                put(&mut m.shared_conflict_pct_from_rule, p);
            }
        }
        // "... 14680064 excessive sectors (78% of the total 18874368 sectors)."
        "UncoalescedGlobalAccess" => {
            if let Some(p) = number_before(d, "% of the total") {
                put(&mut m.uncoalesced_excess_pct_from_rule, p);
            }
        }
        // "On average, each warp of this workload spends 12.8 cycles being
        // stalled waiting for sibling warps at a CTA barrier. ..."
        "CPIStall" => {
            if let Some((cycles, reason)) = stall_from_rule(d) {
                if !m.stalls.iter().any(|(r, _)| *r == reason) {
                    m.stalls.push((reason, cycles));
                }
            }
        }
        // "Tensor is the highest-utilized pipeline (93.6%) ..."
        "HighPipeUtilization" => {
            if let Some((pipe, rest)) = d.split_once(" is the highest-utilized pipeline (") {
                let pct = rest
                    .split('%')
                    .next()
                    .and_then(|p| p.trim().parse::<f64>().ok());
                if let Some(pct) = pct {
                    let slot = match pipe.trim() {
                        p if p.starts_with("Tensor") => Some(&mut m.tensor_pct),
                        "FMA" | "FMA (FP16)" => Some(&mut m.fma_pct),
                        "ALU" => Some(&mut m.alu_pct),
                        "XU" => Some(&mut m.xu_pct),
                        "LSU" => Some(&mut m.lsu_pct),
                        p if p.starts_with("FP64") || p.starts_with("DMMA") => {
                            Some(&mut m.fp64_pct)
                        }
                        _ => None,
                    };
                    if let Some(slot) = slot {
                        put(slot, pct);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The stall reason and its cycles per issued instruction from the text of
/// ncu's CPIStall rule ("... spends 417.4 cycles being stalled waiting for a
/// scoreboard dependency on a L1TEX ..."): the details page has no metric
/// row per stall reason, only the rule naming the largest ones.
fn stall_from_rule(d: &str) -> Option<(f64, StallReason)> {
    let (head, rest) = d.split_once(" cycles being stalled ")?;
    let cycles: f64 = head.rsplit(' ').next()?.replace(',', "").parse().ok()?;
    let what = rest.split('.').next().unwrap_or(rest);
    // Most specific phrases first: "scoreboard dependency on a MIO" before "MIO".
    const PHRASES: &[(&str, StallReason)] = &[
        ("CTA barrier", StallReason::Barrier),
        ("memory barrier", StallReason::Membar),
        (
            "scoreboard dependency on a L1TEX",
            StallReason::LongScoreboard,
        ),
        (
            "scoreboard dependency on a MIO",
            StallReason::ShortScoreboard,
        ),
        ("(LG) memory operations", StallReason::LgThrottle),
        (
            "MIO (memory input/output) instruction queue",
            StallReason::MioThrottle,
        ),
        (
            "execution pipe to be available",
            StallReason::MathPipeThrottle,
        ),
        ("fixed latency execution dependency", StallReason::Wait),
        ("branch target", StallReason::BranchResolving),
        ("not selected", StallReason::NotSelected),
        ("instruction", StallReason::NoInstruction),
    ];
    PHRASES
        .iter()
        .find(|(p, _)| what.contains(p))
        .map(|(_, r)| (cycles, *r))
}

/// The number that ends right before `marker` ("... (78% of the total" -> 78).
fn number_before(text: &str, marker: &str) -> Option<f64> {
    let end = text.find(marker)?;
    let head = &text[..end];
    // The digits at the end of `head` (the character before them may be
    // several bytes long: never cut inside it).
    let digits = head.get(
        head.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
            .len()..,
    )?;
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::number_before;

    #[test]
    fn numbers_in_rule_text() {
        assert_eq!(
            number_before(
                "a total of 14680064 excessive sectors (78% of the total 18874368 sectors)",
                "% of the total"
            ),
            Some(78.0)
        );
        assert_eq!(
            number_before(
                "conflicts,  which represent 96.90% of the overall 67641673",
                "% of the overall"
            ),
            Some(96.9)
        );
        assert_eq!(number_before("nothing here", "% of the total"), None);
    }

    #[test]
    fn stall_reasons_in_cpistall_text() {
        use kopt_model::StallReason as R;
        let cases = [
            ("On average, each warp of this workload spends 12.8 cycles being stalled waiting for sibling warps at a CTA barrier. A high number", 12.8, R::Barrier),
            ("On average, each warp of this workload spends 4583.7 cycles being stalled waiting for the L1 instruction queue for local and global (LG) memory operations to be not full. Typically", 4583.7, R::LgThrottle),
            ("On average, each warp of this workload spends 11.2 cycles being stalled waiting for the MIO (memory input/output) instruction queue to be not full. This", 11.2, R::MioThrottle),
            ("On average, each warp of this workload spends 417.4 cycles being stalled waiting for a scoreboard dependency on a L1TEX (local, global, surface, texture) operation. Find", 417.4, R::LongScoreboard),
            ("On average, each warp of this workload spends 52.7 cycles being stalled waiting for a scoreboard dependency on a MIO (memory input/output) operation (not to L1TEX). The", 52.7, R::ShortScoreboard),
        ];
        for (text, cycles, reason) in cases {
            assert_eq!(
                super::stall_from_rule(text),
                Some((cycles, reason)),
                "{text}"
            );
        }
        assert_eq!(
            super::stall_from_rule("Check the Warp Stall Sampling table"),
            None
        );
    }

    #[test]
    fn a_multibyte_character_before_the_number_is_not_cut() {
        // Fuzzed: "é" (two bytes) right before the digits used to be sliced inside.
        assert_eq!(
            number_before("aé78% of the total", "% of the total"),
            Some(78.0)
        );
        assert_eq!(number_before("é% of the total", "% of the total"), None);
    }
}
