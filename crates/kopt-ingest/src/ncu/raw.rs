//! The raw page: `ncu --csv --page raw [--print-units base]`.

use kopt_model::{Device, KernelLaunch, Metrics, StallReason};

use super::{check_value, parse_dim3, sample_style, Ctx, NcuFile, NcuPage, Verdict};
use crate::number::{parse_cell, Cell, NumberStyle};
use crate::units::to_base_factor;
use crate::IngestError;

type Slot = fn(&mut Metrics) -> &mut Option<f64>;

/// Raw metric name -> where kopt keeps it. Where several names feed one slot
/// (tensor pipe counters differ across chips), the largest value wins.
const RAW_METRICS: &[(&str, Slot)] = &[
    ("gpu__time_duration.sum", |m| &mut m.duration_ns),
    ("sm__cycles_elapsed.avg.per_second", |m| &mut m.sm_clock_hz),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", |m| {
        &mut m.sm_pct
    }),
    (
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.memory_pct,
    ),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", |m| {
        &mut m.dram_pct
    }),
    ("lts__throughput.avg.pct_of_peak_sustained_elapsed", |m| {
        &mut m.l2_pct
    }),
    ("l1tex__throughput.avg.pct_of_peak_sustained_active", |m| {
        &mut m.l1_pct
    }),
    ("dram__bytes_read.sum", |m| &mut m.dram_bytes_read),
    // Local memory (register spills, per-thread arrays indexed at run time).
    ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", |m| {
        &mut m.local_ld_sectors
    }),
    ("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", |m| {
        &mut m.local_st_sectors
    }),
    ("smsp__inst_executed_op_local_ld.sum", |m| {
        &mut m.local_ld_inst
    }),
    ("smsp__inst_executed_op_local_st.sum", |m| {
        &mut m.local_st_inst
    }),
    ("dram__bytes_write.sum", |m| &mut m.dram_bytes_write),
    ("dram__bytes.sum.per_second", |m| &mut m.dram_bytes_per_s),
    ("launch__grid_size", |m| &mut m.grid_size),
    ("launch__block_size", |m| &mut m.block_size),
    ("launch__registers_per_thread", |m| {
        &mut m.registers_per_thread
    }),
    ("launch__shared_mem_per_block_static", |m| {
        &mut m.shared_mem_static
    }),
    ("launch__shared_mem_per_block_dynamic", |m| {
        &mut m.shared_mem_dynamic
    }),
    ("launch__waves_per_multiprocessor", |m| &mut m.waves_per_sm),
    ("launch__sm_count", |m| &mut m.sm_count),
    ("launch__occupancy_limit_blocks", |m| {
        &mut m.occupancy_limit_blocks
    }),
    ("launch__occupancy_limit_registers", |m| {
        &mut m.occupancy_limit_registers
    }),
    ("launch__occupancy_limit_shared_mem", |m| {
        &mut m.occupancy_limit_shared_mem
    }),
    ("launch__occupancy_limit_warps", |m| {
        &mut m.occupancy_limit_warps
    }),
    ("sm__maximum_warps_per_active_cycle_pct", |m| {
        &mut m.occupancy_theoretical_pct
    }),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", |m| {
        &mut m.occupancy_achieved_pct
    }),
    (
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        |m| &mut m.tensor_pct,
    ),
    (
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        |m| &mut m.tensor_pct,
    ),
    (
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        |m| &mut m.tensor_pct,
    ),
    (
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
        |m| &mut m.fma_pct,
    ),
    (
        "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
        |m| &mut m.alu_pct,
    ),
    (
        "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
        |m| &mut m.fp64_pct,
    ),
    (
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
        |m| &mut m.xu_pct,
    ),
    // ncu's basic set has the pipes per elapsed cycle (at most the
    // per-active-cycle figure; where both are there, the larger stays).
    (
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.xu_pct,
    ),
    (
        "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.lsu_pct,
    ),
    (
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.fma_pct,
    ),
    (
        "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.alu_pct,
    ),
    (
        "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.fp64_pct,
    ),
    (
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.tensor_pct,
    ),
    (
        "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.l2_atomic_pct,
    ),
    (
        "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.l1_wavefronts_pct,
    ),
    (
        "l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.l1_bank_reads_pct,
    ),
    (
        "l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed",
        |m| &mut m.l1_bank_writes_pct,
    ),
    (
        "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
        |m| &mut m.lsu_pct,
    ),
    ("smsp__average_warp_latency_per_inst_issued.ratio", |m| {
        &mut m.warp_cycles_per_issue
    }),
    ("smsp__thread_inst_executed_per_inst_executed.ratio", |m| {
        &mut m.active_threads_per_inst
    }),
    ("smsp__sass_branch_targets_threads_divergent.sum", |m| {
        &mut m.divergent_branches
    }),
    (
        "l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum",
        |m| &mut m.global_atom_accesses,
    ),
    (
        "l1tex__t_set_accesses_pipe_lsu_mem_global_op_red.sum",
        |m| &mut m.global_red_accesses,
    ),
    ("lts__t_sectors_op_atom.sum", |m| &mut m.l2_atom_sectors),
    ("lts__t_sectors_op_red.sum", |m| &mut m.l2_red_sectors),
    // --set full has the L2 sectors from L1 (the SMs) rather than all units.
    ("lts__t_sectors_srcunit_tex_op_atom.sum", |m| {
        &mut m.l2_atom_sectors
    }),
    ("lts__t_sectors_srcunit_tex_op_red.sum", |m| {
        &mut m.l2_red_sectors
    }),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", |m| {
        &mut m.global_atom_accesses
    }),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_red.sum", |m| {
        &mut m.global_red_accesses
    }),
    (
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum",
        |m| &mut m.shared_atom_wavefronts,
    ),
    ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", |m| {
        &mut m.inst_ffma
    }),
    ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", |m| {
        &mut m.inst_fadd
    }),
    ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", |m| {
        &mut m.inst_fmul
    }),
    (
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        |m| &mut m.shared_ld_conflicts,
    ),
    (
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        |m| &mut m.shared_st_conflicts,
    ),
    (
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        |m| &mut m.shared_ld_wavefronts,
    ),
    (
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
        |m| &mut m.shared_st_wavefronts,
    ),
    ("smsp__sass_data_bytes_mem_global_op_ld.sum", |m| {
        &mut m.global_ld_bytes_requested
    }),
    ("smsp__sass_data_bytes_mem_global_op_st.sum", |m| {
        &mut m.global_st_bytes_requested
    }),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", |m| {
        &mut m.global_ld_sectors
    }),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", |m| {
        &mut m.global_st_sectors
    }),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", |m| {
        &mut m.global_ld_requests
    }),
];

/// Keep the larger of an existing and a new value.
pub(crate) fn put(slot: &mut Option<f64>, v: f64) {
    *slot = Some(slot.map_or(v, |old| old.max(v)));
}

struct Column {
    index: usize,
    factor: f64,
    /// As the units row gives it ("" without one).
    unit: String,
    target: Target,
}

enum Target {
    Slot(Slot),
    Stall(StallReason),
}

/// The units row of a raw page (`--print-units base`): the row after the
/// header whose ID cell is empty. Without one every unit is "".
struct Units(Option<csv::ByteRecord>);

impl Units {
    /// Column `i`'s unit as the row gives it ("" without one).
    fn text(&self, i: usize) -> String {
        self.0
            .as_ref()
            .and_then(|u| u.get(i))
            .map(|u| String::from_utf8_lossy(u).trim().to_string())
            .unwrap_or_default()
    }

    /// The factor taking column `i`'s values to kopt's base unit.
    fn factor(&self, i: usize) -> f64 {
        self.0
            .as_ref()
            .and_then(|u| u.get(i))
            .map(|u| to_base_factor(&String::from_utf8_lossy(u)))
            .unwrap_or(1.0)
    }
}

/// The columns every raw page must have: ID, Kernel Name and the duration.
fn required_columns(columns: &[String], ctx: &Ctx) -> Result<(usize, usize, usize), IngestError> {
    let hint = " (is this `ncu --csv --page raw` output?)";
    let id_col = ctx.column(columns, "ID", hint)?;
    let name_col = ctx.column(columns, "Kernel Name", hint)?;
    let Some(duration) = columns.iter().position(|c| c == "gpu__time_duration.sum") else {
        return Err(IngestError::at(
            ctx.path,
            ctx.line_offset + 1,
            "missing column \"gpu__time_duration.sum\": kopt ranks kernels by time; collect it (`ncu --metrics gpu__time_duration.sum,...`)",
        ));
    };
    Ok((id_col, name_col, duration))
}

/// The row after the header: the units row, or else the first data row
/// with its line.
fn read_units_row(
    reader: &mut csv::Reader<&[u8]>,
    width: usize,
    id_col: usize,
    ctx: &Ctx,
) -> Result<(Units, Option<(u64, csv::ByteRecord)>), IngestError> {
    let mut record = csv::ByteRecord::new();
    if !reader
        .read_byte_record(&mut record)
        .map_err(|e| ctx.csv_error(e))?
    {
        return Ok((Units(None), None));
    }
    check_width(&record, width, ctx)?;
    if record.get(id_col).is_some_and(|c| c.is_empty()) {
        Ok((Units(Some(record)), None))
    } else {
        Ok((Units(None), Some((ctx.line_of(&record), record))))
    }
}

/// The metric columns present that kopt reads, with their units. A unit
/// kopt does not know would be read as its base unit (a furlong as a
/// nanosecond): the duration's is an error, another column is left
/// unknown and said once (the second value: the notes).
fn wanted_columns(
    columns: &[String],
    units: &Units,
    duration_index: usize,
    ctx: &Ctx,
) -> Result<(Vec<Column>, Vec<String>), IngestError> {
    let find = |name: &str| columns.iter().position(|c| c == name);
    let mut wanted: Vec<Column> = RAW_METRICS
        .iter()
        .filter_map(|(name, slot)| {
            find(name).map(|index| Column {
                index,
                factor: units.factor(index),
                unit: units.text(index),
                target: Target::Slot(*slot),
            })
        })
        .collect();
    for reason in StallReason::ALL {
        let name = format!(
            "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio",
            reason.metric_stem()
        );
        if let Some(index) = find(&name) {
            wanted.push(Column {
                index,
                factor: 1.0,
                unit: units.text(index),
                target: Target::Stall(reason),
            });
        }
    }
    let duration_unit = units.text(duration_index);
    if !crate::units::is_known(&duration_unit) {
        return Err(IngestError::at(
            ctx.path,
            ctx.line_offset + 2,
            format!(
                "column \"gpu__time_duration.sum\": unit \"{}\" is not a time unit kopt knows (ns, us, ms, s, nsecond, usecond, msecond, second)",
                crate::echo(&duration_unit)
            ),
        ));
    }
    let mut unknown_units = Vec::new();
    wanted.retain(|c| {
        let known = crate::units::is_known(&c.unit);
        if !known {
            unknown_units.push(format!(
                "\"{}\": unit \"{}\" unknown to kopt: the column is left unknown",
                crate::echo(columns.get(c.index).map_or("", String::as_str)),
                crate::echo(&c.unit)
            ));
        }
        known
    });
    Ok((wanted, unknown_units))
}

/// The launches of a raw page, read row by row.
struct RawRows<'c> {
    ctx: &'c Ctx<'c>,
    columns: &'c [String],
    wanted: Vec<Column>,
    id_col: usize,
    name_col: usize,
    duration_index: usize,
    grid_col: Option<usize>,
    block_col: Option<usize>,
    stream_col: Option<usize>,
    /// Number style: decided from the first rows' metric cells.
    style: Option<NumberStyle>,
    launches: Vec<KernelLaunch>,
    /// Each launch's line.
    lines: Vec<u64>,
    any_duration: bool,
    first_data_line: Option<u64>,
    excluded: Vec<String>,
    /// Rows without a duration ("n/a"): their first line and how many.
    untimed: Option<(u64, u64)>,
}

impl RawRows<'_> {
    /// One data row: a launch, or an error naming its line.
    fn row(&mut self, line: u64, rec: &csv::ByteRecord) -> Result<(), IngestError> {
        let ctx = self.ctx;
        check_width(rec, self.columns.len(), ctx)?;
        self.first_data_line.get_or_insert(line);
        let wanted = &self.wanted;
        let style = *self.style.get_or_insert_with(|| {
            let sample: Vec<String> = wanted
                .iter()
                .filter_map(|c| rec.get(c.index))
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect();
            sample_style(&sample)
        });
        let text = |i: usize| std::str::from_utf8(rec.get(i).unwrap_or_default()).unwrap_or("");
        let id = match parse_cell(text(self.id_col), NumberStyle::DotDecimal) {
            Cell::Value(v) if v >= 0.0 => v as u64,
            _ => {
                return Err(IngestError::at(
                    ctx.path,
                    line,
                    format!(
                        "column \"ID\": expected a launch number, found \"{}\"",
                        crate::echo(text(self.id_col))
                    ),
                ))
            }
        };
        let metrics = read_metrics(
            ctx,
            line,
            rec,
            self.columns,
            &self.wanted,
            self.duration_index,
            style,
            &mut self.excluded,
        )?;
        let duration = text(self.duration_index);
        if let Err(why) = super::check_duration(duration, metrics.duration_ns) {
            return Err(IngestError::at(
                ctx.path,
                line,
                format!("column \"gpu__time_duration.sum\": {why}"),
            ));
        }
        if col_has_value(duration) {
            self.any_duration = true;
        } else {
            self.untimed.get_or_insert((line, 0)).1 += 1;
        }
        ctx.launch_budget(self.launches.len(), line)?;
        self.lines.push(line);
        let name = String::from_utf8_lossy(rec.get(self.name_col).unwrap_or_default());
        self.launches.push(KernelLaunch {
            id,
            name: crate::cap_name(&name).0.into_owned(),
            grid: self
                .grid_col
                .and_then(|c| parse_dim3(text(c)))
                .unwrap_or_default(),
            block: self
                .block_col
                .and_then(|c| parse_dim3(text(c)))
                .unwrap_or_default(),
            stream: self.stream_col.and_then(|c| text(c).trim().parse().ok()),
            metrics,
            ncu_rules: Vec::new(),
        });
        Ok(())
    }

    /// The page's launches once every row is read, with the device the
    /// first data row names and the notes.
    fn finish(
        mut self,
        device_row: Option<csv::ByteRecord>,
        units: &Units,
    ) -> Result<NcuFile, IngestError> {
        self.ctx.require_timed_rows(
            self.first_data_line,
            self.any_duration,
            "header but no kernel rows: the profiled program launched no kernel that ncu matched",
            "gpu__time_duration.sum is n/a in every row: nothing to rank (was the capture cut short or the metric unavailable?)",
        )?;
        if let Some((first, n)) = self.untimed {
            self.excluded.push(format!(
                "\"gpu__time_duration.sum\" is n/a in {n} of {} row(s) (the first at line {first}): their time is unknown and counts as 0 ns",
                self.launches.len()
            ));
        }
        let device = device_row.map(|r| device_from_row(&r, self.columns, &|i| units.factor(i)));
        super::check_dram_against_device(
            &mut self.launches,
            &self.lines,
            device.as_ref(),
            &mut self.excluded,
        );
        Ok(NcuFile {
            page: NcuPage::Raw,
            device,
            launches: self.launches,
            excluded: self.excluded,
        })
    }
}

pub(super) fn parse(
    reader: &mut csv::Reader<&[u8]>,
    columns: &[String],
    ctx: &Ctx,
) -> Result<NcuFile, IngestError> {
    let (id_col, name_col, duration_index) = required_columns(columns, ctx)?;
    let (units, first_row) = read_units_row(reader, columns.len(), id_col, ctx)?;
    let (wanted, unknown_units) = wanted_columns(columns, &units, duration_index, ctx)?;
    let find = |name: &str| columns.iter().position(|c| c == name);
    let mut rows = RawRows {
        ctx,
        columns,
        wanted,
        id_col,
        name_col,
        duration_index,
        grid_col: find("Grid Size"),
        block_col: find("Block Size"),
        stream_col: find("Stream"),
        style: None,
        launches: Vec::new(),
        lines: Vec::new(),
        any_duration: false,
        first_data_line: None,
        excluded: unknown_units,
        untimed: None,
    };
    let mut device_row = None;
    if let Some((line, rec)) = first_row {
        rows.row(line, &rec)?;
        device_row = Some(rec);
    }
    let mut record = csv::ByteRecord::new();
    while reader
        .read_byte_record(&mut record)
        .map_err(|e| ctx.csv_error(e))?
    {
        if record.len() == 1 && record.get(0).is_some_and(|c| c.is_empty()) {
            continue; // blank line
        }
        let line = ctx.line_of(&record);
        rows.row(line, &record)?;
        if device_row.is_none() {
            device_row = Some(record.clone());
        }
    }
    rows.finish(device_row, &units)
}

/// A row's metrics from the wanted columns, each checked for plausibility
/// (the duration is checked by the caller): capped or left out values are
/// said in `excluded`, an unreadable one is an error.
#[allow(clippy::too_many_arguments)]
fn read_metrics(
    ctx: &Ctx,
    line: u64,
    rec: &csv::ByteRecord,
    columns: &[String],
    wanted: &[Column],
    duration_index: usize,
    style: NumberStyle,
    excluded: &mut Vec<String>,
) -> Result<Metrics, IngestError> {
    let text = |i: usize| std::str::from_utf8(rec.get(i).unwrap_or_default()).unwrap_or("");
    let mut metrics = Metrics::default();
    for col in wanted {
        let column = columns.get(col.index).map_or("", String::as_str);
        let mut cell = parse_cell(text(col.index), style);
        let value = match cell {
            Cell::Value(v) => Some(v * col.factor),
            _ => None,
        };
        if col.index != duration_index {
            match check_value(column, &col.unit, text(col.index), value) {
                Verdict::Keep => {}
                Verdict::Cap(v, why) => {
                    excluded.push(format!("line {line}: \"{}\": {why}", crate::echo(column)));
                    cell = Cell::Value(v / col.factor);
                }
                Verdict::Exclude(why) => {
                    excluded.push(format!("line {line}: \"{}\": {why}", crate::echo(column)));
                    continue;
                }
                Verdict::Refuse(why) => {
                    return Err(IngestError::at(
                        ctx.path,
                        line,
                        format!("column \"{}\": {why}", crate::echo(column)),
                    ))
                }
            }
        }
        match cell {
            Cell::Value(v) => match col.target {
                Target::Slot(slot) => put(slot(&mut metrics), v * col.factor),
                Target::Stall(r) => metrics.stalls.push((r, v)),
            },
            Cell::Missing => {}
            Cell::Invalid => {
                return Err(IngestError::at(
                    ctx.path,
                    line,
                    format!(
                        "column \"{}\": expected a number, found \"{}\"",
                        crate::echo(column),
                        crate::echo(text(col.index))
                    ),
                ))
            }
        }
    }
    Ok(metrics)
}

fn col_has_value(s: &str) -> bool {
    matches!(parse_cell(s, NumberStyle::DotDecimal), Cell::Value(_))
        || matches!(parse_cell(s, NumberStyle::CommaDecimal), Cell::Value(_))
}

fn check_width(rec: &csv::ByteRecord, width: usize, ctx: &Ctx) -> Result<(), IngestError> {
    if rec.len() != width {
        return Err(IngestError::at(
            ctx.path,
            ctx.line_of(rec),
            format!(
                "row has {} fields but the header has {width} (file truncated or rows of another export mixed in)",
                rec.len()
            ),
        ));
    }
    Ok(())
}

/// Device attributes from one row (they are the same on every row of a device).
fn device_from_row(
    rec: &csv::ByteRecord,
    columns: &[String],
    unit_of: &dyn Fn(usize) -> f64,
) -> Device {
    let get = |name: &str| -> Option<(usize, String)> {
        let i = columns.iter().position(|c| c == name)?;
        let v = String::from_utf8_lossy(rec.get(i)?).trim().to_string();
        (!v.is_empty()).then_some((i, v))
    };
    let num = |name: &str| -> Option<f64> {
        let (i, v) = get(name)?;
        match parse_cell(&v, NumberStyle::DotDecimal) {
            Cell::Value(x) => Some(x * unit_of(i)),
            _ => None,
        }
    };
    let cc = get("CC").map(|(_, v)| v).or_else(|| {
        let major = num("device__attribute_compute_capability_major")?;
        let minor = num("device__attribute_compute_capability_minor").unwrap_or(0.0);
        Some(format!("{major}.{minor}"))
    });
    let mut device = Device {
        name: get("device__attribute_display_name")
            .map(|(_, v)| v)
            .unwrap_or_else(|| "unknown GPU".into()),
        compute_capability: cc,
        sm_count: num("device__attribute_multiprocessor_count").map(|v| v as u32),
        // Clock attributes are in kHz.
        sm_clock_hz: num("device__attribute_clock_rate").map(|k| k * 1e3),
        mem_clock_hz: num("device__attribute_memory_clock_rate").map(|k| k * 1e3),
        mem_bus_width_bits: num("device__attribute_global_memory_bus_width").map(|v| v as u32),
        l2_bytes: num("device__attribute_l2_cache_size").map(|v| v as u64),
        memory_bytes: num("device__attribute_total_memory").map(|v| v as u64),
        ..Device::unknown()
    };
    device.resolve_peaks();
    device
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units_row(cells: &[&str]) -> Units {
        Units(Some(csv::ByteRecord::from(cells.to_vec())))
    }

    /// The column step on its own: known units give their factor, an
    /// unknown one leaves its column out with a note naming it, and an
    /// unknown duration unit is an error on the units line.
    #[test]
    fn wanted_columns_keep_known_units_and_name_the_unknown() {
        let columns: Vec<String> = [
            "ID",
            "Kernel Name",
            "gpu__time_duration.sum",
            "dram__bytes_read.sum",
            "sm__cycles_elapsed.avg.per_second",
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        let ctx = Ctx {
            path: "raw.csv",
            line_offset: 3,
        };
        let units = units_row(&["", "", "usecond", "furlong", "Ghz"]);
        let (wanted, notes) = wanted_columns(&columns, &units, 2, &ctx).unwrap();
        let kept: Vec<(usize, f64)> = wanted.iter().map(|c| (c.index, c.factor)).collect();
        assert_eq!(kept, vec![(2, 1e3), (4, 1e9)]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("dram__bytes_read.sum") && notes[0].contains("furlong"));

        let units = units_row(&["", "", "fortnight", "byte", "hz"]);
        let err = wanted_columns(&columns, &units, 2, &ctx).err().unwrap();
        let msg = err.to_string();
        assert!(msg.contains("fortnight") && msg.contains(":5"), "{msg}");
    }
}
