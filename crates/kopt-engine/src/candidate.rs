//! The mechanical fixes `kopt optimize` (and `kopt profile --verify`)
//! can apply to a PyTorch module: their harness names, what a user types
//! by hand, the finding that gives a reason for each, and how far each may
//! move the outputs. Below the optimize loop and the history, which both
//! read it.

/// The mechanical fixes kopt can apply to a PyTorch module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Candidate {
    /// CUDA graph capture of the forward.
    Graph,
    /// torch.compile(model) in its default mode: Inductor's fused kernels.
    Compile,
    /// torch.compile(mode="reduce-overhead").
    CompileReduceOverhead,
    /// torch.compile(mode="max-autotune-no-cudagraphs").
    CompileMaxAutotune,
    /// The two above combined: compiled kernels replayed from kopt's graph.
    CompileMaxAutotuneGraph,
    /// The model and its 4-d inputs in channels_last memory format.
    ChannelsLast,
    /// TF32 for float32 matmuls and cuDNN.
    Tf32,
    /// torch.autocast to bfloat16 around the forward.
    Bf16Autocast,
    /// Attention through scaled_dot_product_attention (the model's switch).
    Sdpa,
    /// torch.compile with Inductor's freezing (inference: batch norm folded).
    CompileFreezing,
    /// cuDNN's benchmark mode (the fastest algorithm per shape).
    CudnnBenchmark,
    /// A training step's optimizer rebuilt with `fused=True`.
    FusedOptimizer,
    /// A training step's optimizer rebuilt with `foreach=True`.
    ForeachOptimizer,
}

/// How far a candidate's outputs may move from eager's, by what it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Numerics {
    /// Other kernels or another summation order at the same precision.
    /// Graph replay too: cuBLAS picks its kernels again while a graph is
    /// captured, and on an H100 a captured bf16 BERT-base step differed
    /// from eager by a relative L2 of 1.1e-2.
    Reordered,
    /// float32 matmuls and convolutions in TF32 (10-bit mantissa).
    Tf32,
    /// The forward in bfloat16 (8-bit mantissa).
    Bf16,
}

impl Candidate {
    pub const ALL: [Candidate; 13] = [
        Candidate::Graph,
        Candidate::Compile,
        Candidate::CompileReduceOverhead,
        Candidate::CompileMaxAutotune,
        Candidate::CompileMaxAutotuneGraph,
        Candidate::ChannelsLast,
        Candidate::Tf32,
        Candidate::Bf16Autocast,
        Candidate::Sdpa,
        Candidate::CompileFreezing,
        Candidate::CudnnBenchmark,
        Candidate::FusedOptimizer,
        Candidate::ForeachOptimizer,
    ];

    /// The harness's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Candidate::Graph => "graph",
            Candidate::Compile => "compile",
            Candidate::CompileReduceOverhead => "compile_reduce_overhead",
            Candidate::CompileMaxAutotune => "compile_max_autotune",
            Candidate::CompileMaxAutotuneGraph => "compile_max_autotune_graph",
            Candidate::ChannelsLast => "channels_last",
            Candidate::Tf32 => "tf32",
            Candidate::Bf16Autocast => "bf16_autocast",
            Candidate::Sdpa => "sdpa",
            Candidate::CompileFreezing => "compile_freezing",
            Candidate::CudnnBenchmark => "cudnn_benchmark",
            Candidate::FusedOptimizer => "fused_optimizer",
            Candidate::ForeachOptimizer => "foreach_optimizer",
        }
    }

    /// The candidate of a harness name.
    /// What kopt's harness can apply to a training step (its
    /// `TRAINING_CANDIDATES`): the rest rebuild or capture a forward.
    pub fn applies_to_training(self) -> bool {
        matches!(
            self,
            Candidate::Graph
                | Candidate::FusedOptimizer
                | Candidate::ForeachOptimizer
                | Candidate::Bf16Autocast
                | Candidate::Tf32
                | Candidate::Compile
        )
    }

    pub fn from_name(name: &str) -> Option<Candidate> {
        Candidate::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Candidate::Graph => "CUDA graph capture of the forward (static inputs, warm-up on a side stream, replay)",
            Candidate::Compile => "torch.compile(model) in the default mode: Inductor fuses elementwise, normalization and softmax chains",
            Candidate::CompileReduceOverhead => "torch.compile(mode=\"reduce-overhead\"): Inductor kernels replayed from CUDA graphs",
            Candidate::CompileMaxAutotune => "torch.compile(mode=\"max-autotune-no-cudagraphs\"): Inductor kernels, autotuned",
            Candidate::CompileMaxAutotuneGraph => "torch.compile(mode=\"max-autotune-no-cudagraphs\") replayed from a CUDA graph",
            Candidate::ChannelsLast => "the model and its 4-d inputs in channels_last memory format",
            Candidate::Tf32 => "TF32 for float32 matmuls and cuDNN convolutions",
            Candidate::Bf16Autocast => "torch.autocast(\"cuda\", dtype=torch.bfloat16) around the forward",
            Candidate::Sdpa => "attention through scaled_dot_product_attention (the model's attn_implementation switch)",
            Candidate::CompileFreezing => "torch.compile with torch._inductor.config.freezing (weights as constants, batch norm folded into convolutions)",
            Candidate::CudnnBenchmark => "cuDNN benchmark mode (the fastest algorithm per input shape)",
            Candidate::FusedOptimizer => "a training step's optimizer rebuilt with fused=True (one kernel per step for all parameters)",
            Candidate::ForeachOptimizer => "a training step's optimizer rebuilt with foreach=True (multi-tensor kernels)",
        }
    }

    /// The change a user makes by hand, one line of Python each.
    pub fn by_hand(self) -> &'static [&'static str] {
        match self {
            Candidate::Graph => &["g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): out = model(*static_inputs)  # then copy inputs in and g.replay()"],
            Candidate::Compile => &["model = torch.compile(model)"],
            Candidate::CompileReduceOverhead => &["model = torch.compile(model, mode=\"reduce-overhead\")"],
            Candidate::CompileMaxAutotune => &["model = torch.compile(model, mode=\"max-autotune-no-cudagraphs\")"],
            Candidate::CompileMaxAutotuneGraph => &[
                "model = torch.compile(model, mode=\"max-autotune-no-cudagraphs\")",
                "g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): out = model(*static_inputs)  # then copy inputs in and g.replay()",
            ],
            Candidate::ChannelsLast => &[
                "model = model.to(memory_format=torch.channels_last)",
                "x = x.contiguous(memory_format=torch.channels_last)  # each 4-d input",
            ],
            Candidate::Tf32 => &[
                "torch.backends.cuda.matmul.allow_tf32 = True",
                "torch.backends.cudnn.allow_tf32 = True",
            ],
            Candidate::Bf16Autocast => &["with torch.autocast(\"cuda\", dtype=torch.bfloat16): out = model(*inputs)"],
            Candidate::Sdpa => &["model = AutoModel.from_config(config, attn_implementation=\"sdpa\")  # or model.set_attn_implementation(\"sdpa\")"],
            Candidate::CompileFreezing => &[
                "torch._inductor.config.freezing = True",
                "model = torch.compile(model)  # under torch.inference_mode()",
            ],
            Candidate::CudnnBenchmark => &["torch.backends.cudnn.benchmark = True"],
            Candidate::FusedOptimizer => &["optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)  # Adam, AdamW, SGD, ..."],
            Candidate::ForeachOptimizer => &["optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)"],
        }
    }

    /// What it does to the numerics.
    pub fn numerics(self) -> Numerics {
        match self {
            Candidate::Tf32 => Numerics::Tf32,
            Candidate::Bf16Autocast => Numerics::Bf16,
            _ => Numerics::Reordered,
        }
    }

    /// The diagnosis's finding (recommendation id) that gives a reason to
    /// try it, where one does.
    pub fn finding(self) -> Option<&'static str> {
        match self {
            Candidate::Graph
            | Candidate::CompileReduceOverhead
            | Candidate::CompileMaxAutotuneGraph => Some("capture_cuda_graph"),
            Candidate::ChannelsLast => Some("use_channels_last"),
            Candidate::Tf32 | Candidate::Bf16Autocast => Some("enable_tf32"),
            Candidate::Sdpa => Some("use_fused_attention"),
            Candidate::CompileFreezing => Some("fold_batch_norm"),
            Candidate::Compile => Some("use_torch_compile"),
            Candidate::FusedOptimizer => Some("use_fused_optimizer"),
            Candidate::CompileMaxAutotune
            | Candidate::CudnnBenchmark
            | Candidate::ForeachOptimizer => None,
        }
    }

    /// The candidate that applies a recommendation automatically, where
    /// kopt has one (`kopt profile --verify`): the first in `ALL` whose
    /// finding it is, so the plain form where several share a finding
    /// (graph capture before the compiled graph forms, TF32 before bf16).
    pub fn for_finding(recommendation: &str) -> Option<Candidate> {
        Candidate::ALL
            .into_iter()
            .find(|c| c.finding() == Some(recommendation))
    }

    /// The candidate a recommendation's predicted figure is for: the fp32
    /// precision finding prices TF32 and bf16 autocast and headlines the
    /// faster (its title says which); every other finding, `for_finding`.
    pub fn for_recommendation(r: &kopt_model::Recommendation) -> Option<Candidate> {
        match kopt_analyze::precision::headline(r) {
            Some(kopt_analyze::precision::Fix::Bf16Autocast) => Some(Candidate::Bf16Autocast),
            Some(kopt_analyze::precision::Fix::Tf32) => Some(Candidate::Tf32),
            None => Candidate::for_finding(&r.id),
        }
    }

    /// Whether it removes per-launch cost (the graph forms).
    pub(crate) fn removes_launches(self) -> bool {
        matches!(
            self,
            Candidate::Graph
                | Candidate::CompileReduceOverhead
                | Candidate::CompileMaxAutotuneGraph
        )
    }

    /// Whether it runs the model through torch.compile.
    fn compiles(self) -> bool {
        matches!(
            self,
            Candidate::Compile
                | Candidate::CompileReduceOverhead
                | Candidate::CompileMaxAutotune
                | Candidate::CompileMaxAutotuneGraph
                | Candidate::CompileFreezing
        )
    }

    /// Whether two candidates can be applied together: one graph form and
    /// one compile form at most (each already includes what the other would
    /// redo).
    pub fn stacks_with(self, other: Candidate) -> bool {
        self != other
            && !(self.removes_launches() && other.removes_launches())
            && !(self.compiles() && other.compiles())
            && !(self.optimizer_form() && other.optimizer_form())
            && !(self.precision() && other.precision())
    }

    /// Whether it lowers the precision of the float32 GEMMs: bf16 autocast
    /// casts the GEMMs TF32 would speed up, so the pair is redundant (the
    /// stack measures the autocast alone, at the cost of a second harness
    /// run).
    fn precision(self) -> bool {
        matches!(self, Candidate::Tf32 | Candidate::Bf16Autocast)
    }

    /// Whether it rebuilds a training step's optimizer (one form at a time).
    fn optimizer_form(self) -> bool {
        matches!(
            self,
            Candidate::FusedOptimizer | Candidate::ForeachOptimizer
        )
    }
}

impl Numerics {
    /// The relative L2 tolerance, for outputs of `dtype` (safetensors
    /// name, lower case) when eager itself runs float32 work in TF32 or not.
    ///
    /// Reordered: float32 1e-4 (5e-3 when eager already uses TF32), 16-bit
    /// types 3e-2 (two 16-bit computations of a deep network differ by
    /// about what one differs from float32). TF32: 5e-3. bf16: 3e-2. Element-wise, an output may move
    /// by 10x the tolerance times the reference's RMS plus 10x the
    /// tolerance of its own size (torch.allclose's rule, scaled to the
    /// tensor): loose enough for a deep network's rounding, tight enough
    /// that a sign flip or a wrong element of any size fails.
    pub fn tolerance(self, dtype: &str, eager_tf32: bool) -> f64 {
        let sixteen = matches!(dtype, "f16" | "bf16");
        match self {
            Numerics::Reordered | Numerics::Tf32 if sixteen => 3e-2,
            Numerics::Reordered if eager_tf32 => 5e-3,
            Numerics::Reordered => 1e-4,
            Numerics::Tf32 => 5e-3,
            Numerics::Bf16 => 3e-2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Numerics::Reordered => "reordered",
            Numerics::Tf32 => "tf32",
            Numerics::Bf16 => "bf16",
        }
    }

    /// Whether it changes numerics on purpose (kept only when allowed).
    pub fn changes_precision(self) -> bool {
        matches!(self, Numerics::Tf32 | Numerics::Bf16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redundant_pairs_never_stack() {
        use Candidate as C;
        assert!(
            !C::Tf32.stacks_with(C::Bf16Autocast),
            "autocast casts TF32's GEMMs"
        );
        assert!(!C::Bf16Autocast.stacks_with(C::Tf32));
        assert!(!C::FusedOptimizer.stacks_with(C::ForeachOptimizer));
        assert!(C::Tf32.stacks_with(C::Graph) && C::Bf16Autocast.stacks_with(C::Sdpa));
    }

    #[test]
    fn each_finding_is_verified_by_its_plain_candidate() {
        let cases = [
            ("capture_cuda_graph", Candidate::Graph),
            ("use_channels_last", Candidate::ChannelsLast),
            ("enable_tf32", Candidate::Tf32),
            ("use_fused_attention", Candidate::Sdpa),
            ("fold_batch_norm", Candidate::CompileFreezing),
            ("use_torch_compile", Candidate::Compile),
        ];
        for (finding, candidate) in cases {
            assert_eq!(
                Candidate::for_finding(finding),
                Some(candidate),
                "{finding}"
            );
        }
        assert_eq!(Candidate::for_finding("pad_gemm_shapes"), None);
    }
}
