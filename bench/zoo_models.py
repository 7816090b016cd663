"""The models of the zoo, defined once for scripts/gen-zoo and bench/peer_infer.py.

Each model is a small configuration of what PyPI's transformers and
torchvision build (or, for gpt_block_legacy, a GPT block in plain torch),
randomly initialized from a fixed seed, in eval mode and f32. gen-zoo exports
them to tests/zoo/<name>/model.onnx with the exporter named here; peer_infer.py
rebuilds the same modules at GPU-sized shapes. Nothing is downloaded.

torch is imported only inside the functions that need it, so a script that
imports this module answers --help without torch.
"""
import dataclasses

VOCAB = 256
MAX_POSITIONS = 512  # the longest sequence peer_infer.py runs (gen-zoo's is 16)
SEED = 0             # model weights
INPUT_SEED = 1       # example inputs
LEGACY_OPSET = 17    # what the TorchScript exporter's users mostly ran
DYNAMO_OPSET = None  # None: the exporter's default, which zoo.json records


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    source: str                 # what built it, as zoo.json says
    exporter: str               # "dynamo" or "legacy" (TorchScript)
    inputs: tuple               # (name, dims); a dim is an int or a symbol name
    output: str
    zoo_sizes: dict             # the symbols' sizes of the committed example inputs
    bench_sizes: dict           # peer_infer.py's
    notes: str = ""

    @property
    def family(self):
        return {"images": "vision", "input_values": "audio"}.get(self.inputs[0][0], "text")


def _lm(name, source, mask=False, exporter="dynamo", notes=""):
    inputs = (("input_ids", ("batch", "seq")),)
    if mask:
        inputs += (("attention_mask", ("batch", "seq")),)
    return Spec(name, source, exporter, inputs, "last_hidden_state", {"batch": 2, "seq": 16},
                {"batch": 8, "seq": 512}, notes)


def _vision(name, source, size, bench_batch=256):
    return Spec(name, source, "dynamo", (("images", ("batch", 3, size, size)),), "logits", {"batch": 2},
                {"batch": bench_batch})


def _audio(name, source, notes):
    """Raw 16 kHz waveforms of any length: the sample count is symbolic."""
    return Spec(name, source, "dynamo", (("input_values", ("batch", "samples")),), "last_hidden_state",
                {"batch": 2, "samples": 1600}, {"batch": 16, "samples": 16000}, notes)


def _segmentation(name, source, notes):
    """Images of any size that is a multiple of 32: height and width are torch.export's derived dims."""
    return Spec(name, source, "dynamo", (("images", ("batch", 3, "32*h", "32*w")),), "logits",
                {"batch": 2, "h": 2, "w": 3}, {"batch": 64, "h": 8, "w": 8}, notes)


def _any_size(name, source, notes):
    """Images of any size that is a multiple of 4 (a patch), 52x44 in the example: 13x11 patches, so
    every window and every merge pads."""
    return Spec(name, source, "dynamo", (("images", ("batch", 3, "4*h", "4*w")),), "logits",
                {"batch": 2, "h": 13, "w": 11}, {"batch": 64, "h": 56, "w": 56}, notes)


MODELS = {s.name: s for s in [
    _lm("gpt2", "transformers GPT2Model (2 layers, d 64, 4 heads)",
        notes="input_ids only: the causal mask depends on the shapes alone"),
    _lm("gpt2_mask", "transformers GPT2Model (2 layers, d 64, 4 heads)", mask=True,
        notes="with a padding attention_mask: the mask depends on data"),
    _lm("gpt2_legacy", "transformers GPT2Model (2 layers, d 64, 4 heads)", exporter="legacy",
        notes="gpt2 through the TorchScript exporter"),
    _lm("llama", "transformers LlamaModel (2 layers, d 64, 4 heads, 2 kv heads)",
        notes="GQA, RoPE, RMSNorm, SiLU MLP"),
    _lm("bert", "transformers BertModel (2 layers, d 64, 4 heads)", mask=True,
        notes="bidirectional attention with a padding attention_mask"),
    _lm("phi", "transformers PhiModel (2 layers, d 64, 4 heads, rotary on half of each head)",
        notes="attention and MLP in parallel from one LayerNorm, partial RoPE, tanh GELU"),
    _lm("gemma", "transformers GemmaModel (2 layers, d 64, 4 heads of 16, 1 kv head)",
        notes="multi-query attention, RMSNorm scaling by 1 + weight, GeGLU MLP, embeddings scaled by sqrt(d)"),
    _lm("gemma2", "transformers Gemma2Model (2 layers, d 64, 4 heads of 16, 2 kv heads, soft-capped scores, "
        "a sliding window of 8 on alternate layers)"),
    _lm("deberta", "transformers DebertaV2Model (2 layers, d 64, 4 heads, 32 relative position buckets)", mask=True,
        notes="disentangled attention: content-to-position and position-to-content scores gathered from relative "
              "embeddings repeated over the batch"),
    _lm("bloom", "transformers BloomModel (2 layers, d 64, 4 heads)", mask=True,
        notes="ALiBi: per-head slopes times positions counted from the padding mask, added to the scores by "
              "baddbmm"),
    _lm("gptneox", "transformers GPTNeoXModel (2 layers, d 64, 4 heads, rotary on a quarter of each head)",
        notes="one fused QKV projection viewed as [b, s, heads, 3 * head] and sliced per head, parallel residual"),
    _lm("falcon", "transformers FalconModel (2 layers, d 64, 4 heads, multi-query)",
        notes="one fused QKV projection, its single K and V head sliced off the end, rotary, parallel attention "
              "and MLP"),
    _audio("wav2vec2", "transformers Wav2Vec2Model (3 conv layers of 16 channels, strides 5, 2, 2; 2 layers, d 64, "
           "4 heads)",
           "a feature encoder of strided Conv1d and GroupNorm, whose frame count is nested floor divisions of the "
           "symbolic sample count, then a grouped positional Conv1d and a post-LN encoder"),
    _vision("vit", "torchvision VisionTransformer (32x32, patch 8, 2 layers, d 64, 4 heads)", 32),
    _vision("swin", "torchvision SwinTransformer (64x64, patch 4, 2 stages of 2 blocks, d 16, window 4)", 64),
    _any_size("swin_any_size", "torchvision SwinTransformer (patch 4, stages of 2 and 1 blocks, d 16, window 4) on "
              "images of any multiple of 4",
              "height and width symbolic: each stage pads to a multiple of its window ((4 - H % 4) % 4) and each "
              "patch merging to an even size, pads computed from the shapes"),
    _vision("swinv2", "transformers Swinv2ForImageClassification (32x32, patch 2, 1 stage of 2 blocks, d 16, "
            "window 4, cosine attention)", 32),
    _vision("maxvit", "torchvision MaxVit (32x32, 2 stages of 16 and 32 channels, partition 4, heads of 8)", 32),
    _vision("convnext", "torchvision ConvNeXt (2 stages of 16 and 32 channels)", 32),
    _vision("efficientnet", "torchvision EfficientNet (3 MBConv stages, 8 to 24 channels)", 32),
    _vision("resnet", "torchvision BasicBlock ResNet-18 layout at 1/8 width (8..64 channels)", 32),
    _vision("mobilenetv3", "torchvision mobilenet_v3_small(width_mult=0.25)", 64),
    _segmentation("lraspp", "torchvision LRASPP head (16 channels, 3 classes) on a dilated "
                  "mobilenet_v3_small(width_mult=0.25)",
                  "height and width symbolic multiples of 32: strided convolutions, then bilinear upsampling "
                  "to sizes computed from shapes"),
    Spec("gpt_block_legacy", "plain torch pre-LN GPT block (d 64, 4 heads, tril causal mask)", "legacy",
         (("x", ("batch", "seq", 64)),), "y", {"batch": 2, "seq": 16}, {"batch": 8, "seq": 512},
         "the causal mask is torch.tril(torch.ones(T, T)) of the runtime seq length"),
]}


# ----------------------------------------------------------------------------- building

def _wrap_lm(torch, model, mask):
    """The transformers model taking tensors positionally and returning last_hidden_state alone."""
    nn = torch.nn

    class IdsOnly(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, use_cache=False).last_hidden_state

    class IdsAndMask(IdsOnly):
        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state

    return IdsAndMask() if mask else IdsOnly()


def _logits_of(torch, model):
    """The transformers image classifier taking images positionally and returning its logits alone."""

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, images):
            return self.model(pixel_values=images).logits

    return Logits()


def _hidden_state_of(torch, model):
    """The transformers speech encoder taking waveforms positionally and returning last_hidden_state alone."""

    class HiddenState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_values):
            return self.model(input_values=input_values).last_hidden_state

    return HiddenState()


def _gpt_block(torch, d=64, heads=4):
    nn, F = torch.nn, torch.nn.functional

    class GptBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.attn_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            scores = q @ k.transpose(-2, -1) * (1.0 / (c // self.heads) ** 0.5)
            causal = torch.tril(torch.ones(t, t, device=x.device))
            scores = scores.masked_fill(causal == 0, float("-inf"))
            y = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.attn_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    return GptBlock()


def _lraspp(torch):
    """torchvision's LR-ASPP segmentation head on a small MobileNetV3, returning the logits tensor."""
    from torchvision.models import mobilenet_v3_small
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.segmentation.lraspp import LRASPP
    features = mobilenet_v3_small(weights=None, width_mult=0.25, dilated=True).features
    # torchvision's own choice of taps: the last stride-8 block for the low branch, the last block for the high.
    stages = [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] + [len(features) - 1]
    low, high = stages[-4], stages[-1]
    backbone = IntermediateLayerGetter(features, return_layers={str(low): "low", str(high): "high"})
    head = LRASPP(backbone, features[low].out_channels, features[high].out_channels, num_classes=3,
                  inter_channels=16)

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = head

        def forward(self, images):
            return self.model(images)["out"]

    return Logits()


def _tiny_resnet(torch, widths=(8, 16, 32, 64), blocks=(2, 2, 2, 2), classes=10):
    """torchvision's ResNet-18 layout (BasicBlock, [2, 2, 2, 2]) at 1/8 of its width.

    torchvision's ResNet class fixes the widths at 64..512 (45 MB), so the stem,
    stages and head are assembled here around its BasicBlock, named as in
    torchvision (conv1, bn1, layer1..layer4, fc).
    """
    from torchvision.models.resnet import BasicBlock, conv1x1
    nn = torch.nn

    class TinyResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            cin = widths[0]
            for i, (width, count) in enumerate(zip(widths, blocks)):
                stride = 1 if i == 0 else 2
                down = None
                if stride != 1 or cin != width:
                    down = nn.Sequential(conv1x1(cin, width, stride), nn.BatchNorm2d(width))
                layers = [BasicBlock(cin, width, stride, down)] + [BasicBlock(width, width) for _ in range(count - 1)]
                setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
                cin = width
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return TinyResNet()


def _perturb_norms(torch, model):
    """Random affine parameters and running statistics for the norm layers.

    Freshly built norms are identities (scale 1, shift 0, mean 0, variance 1),
    which would hide a mistake in their handling: a folded BatchNormalization,
    a LayerNormalization's bias, an RMSNorm's weight.
    """
    gen = torch.Generator().manual_seed(SEED + 7)
    for module in model.modules():
        kind = type(module).__name__
        if not (isinstance(module, (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.modules.batchnorm._BatchNorm))
                or kind.endswith("RMSNorm")):
            continue
        with torch.no_grad():
            for attr, base, spread in (("weight", 1.0, 0.5), ("bias", 0.0, 0.2), ("running_mean", 0.0, 0.2),
                                       ("running_var", 1.0, 0.5)):
                t = getattr(module, attr, None)
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    t.copy_(base + spread * (2 * torch.rand(t.shape, generator=gen) - 1))


def build(torch, name):
    """The model `name`, freshly initialized from SEED, in eval mode, on the CPU."""
    spec = MODELS[name]
    torch.manual_seed(SEED)
    if name.startswith("gpt2"):
        import transformers
        config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=MAX_POSITIONS, n_embd=64, n_layer=2,
                                         n_head=4, n_inner=256, bos_token_id=0, eos_token_id=0)
        model = _wrap_lm(torch, transformers.GPT2Model(config), len(spec.inputs) > 1)
    elif name == "llama":
        import transformers
        config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=MAX_POSITIONS)
        model = _wrap_lm(torch, transformers.LlamaModel(config), False)
    elif name == "bert":
        import transformers
        config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=128,
                                         max_position_embeddings=MAX_POSITIONS)
        model = _wrap_lm(torch, transformers.BertModel(config, add_pooling_layer=False), True)
    elif name == "phi":
        import transformers
        config = transformers.PhiConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, partial_rotary_factor=0.5,
                                        max_position_embeddings=MAX_POSITIONS)
        model = _wrap_lm(torch, transformers.PhiModel(config), False)
    elif name == "gemma":
        import transformers
        config = transformers.GemmaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                          max_position_embeddings=MAX_POSITIONS)
        model = _wrap_lm(torch, transformers.GemmaModel(config), False)
    elif name == "gemma2":
        import transformers
        config = transformers.Gemma2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8,
                                           max_position_embeddings=MAX_POSITIONS)
        model = _wrap_lm(torch, transformers.Gemma2Model(config), False)
    elif name == "deberta":
        import transformers
        config = transformers.DebertaV2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                              num_hidden_layers=2, num_attention_heads=4,
                                              max_position_embeddings=MAX_POSITIONS, relative_attention=True,
                                              position_buckets=32, pos_att_type=["p2c", "c2p"])
        model = _wrap_lm(torch, transformers.DebertaV2Model(config), True)
    elif name == "bloom":
        import transformers
        config = transformers.BloomConfig(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4)
        model = _wrap_lm(torch, transformers.BloomModel(config), True)
    elif name == "gptneox":
        import transformers
        config = transformers.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                            num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.25,
                                            max_position_embeddings=MAX_POSITIONS)
        model = _wrap_lm(torch, transformers.GPTNeoXModel(config), False)
    elif name == "falcon":
        import transformers
        config = transformers.FalconConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                           num_attention_heads=4, max_position_embeddings=MAX_POSITIONS)
        model = _wrap_lm(torch, transformers.FalconModel(config), False)
    elif name == "wav2vec2":
        import transformers
        config = transformers.Wav2Vec2Config(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                             num_attention_heads=4, intermediate_size=128, conv_dim=(16, 16, 16),
                                             conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                             feat_extract_norm="group", do_stable_layer_norm=False)
        model = _hidden_state_of(torch, transformers.Wav2Vec2Model(config))
    elif name == "vit":
        import torchvision
        model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                                     hidden_dim=64, mlp_dim=128, num_classes=10)
    elif name in ("swin", "swin_any_size"):
        from torchvision.models.swin_transformer import SwinTransformer
        depths = [2, 2] if name == "swin" else [2, 1]  # a shifted block, a merge: within the zoo's size limit
        model = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=depths, num_heads=[2, 4], window_size=[4, 4],
                                stochastic_depth_prob=0.0, num_classes=10)
    elif name == "swinv2":
        import transformers
        config = transformers.Swinv2Config(image_size=32, patch_size=2, embed_dim=16, depths=[2], num_heads=[2],
                                           window_size=4, num_labels=10)
        model = _logits_of(torch, transformers.Swinv2ForImageClassification(config))
    elif name == "maxvit":
        from torchvision.models.maxvit import MaxVit
        model = MaxVit(input_size=(32, 32), stem_channels=16, partition_size=4, block_channels=[16, 32],
                       block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10)
    elif name == "convnext":
        from torchvision.models.convnext import CNBlockConfig, ConvNeXt
        # layer_scale 0.5 instead of torchvision's 1e-6, which would leave each block an identity.
        model = ConvNeXt([CNBlockConfig(16, 32, 2), CNBlockConfig(32, None, 2)], layer_scale=0.5, num_classes=10)
    elif name == "efficientnet":
        from torchvision.models.efficientnet import EfficientNet, MBConvConfig
        model = EfficientNet([MBConvConfig(1, 3, 1, 16, 8, 1), MBConvConfig(4, 3, 2, 8, 16, 2),
                              MBConvConfig(4, 5, 2, 16, 24, 1)], dropout=0.2, stochastic_depth_prob=0.0,
                             num_classes=10)
    elif name == "resnet":
        model = _tiny_resnet(torch)
    elif name == "mobilenetv3":
        import torchvision
        model = torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.25, num_classes=10)
    elif name == "lraspp":
        model = _lraspp(torch)
    elif name == "gpt_block_legacy":
        model = _gpt_block(torch)
    else:
        raise KeyError(name)
    if spec.family == "vision":
        # torchvision starts ViT's head at zero and MobileNet's classifier at std 0.01, which leaves
        # logits of 0 and 1e-3: nothing a tolerance of 1e-4 could tell apart. torch's default init
        # for every Linear gives logits of order 1.
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.reset_parameters()
    _perturb_norms(torch, model)
    return model.float().eval()


def _size(dim, sizes):
    """A dim's size: an int, a symbol, or a multiple of one ("32*h")."""
    if isinstance(dim, int):
        return dim
    factor, _, symbol = dim.rpartition("*")
    return int(factor or 1) * sizes[symbol]


def input_shapes(name, sizes):
    """{input name: concrete shape} at these symbol sizes."""
    return {n: tuple(_size(d, sizes) for d in dims) for n, dims in MODELS[name].inputs}


def make_inputs(torch, name, sizes):
    """The inputs at these symbol sizes, from INPUT_SEED: token ids across the vocabulary, an
    attention_mask of ones with the last quarter of every odd row padding (0), images and waveforms in [-1, 1)."""
    gen = torch.Generator().manual_seed(INPUT_SEED)
    out = {}
    for n, shape in input_shapes(name, sizes).items():
        if n == "input_ids":
            out[n] = torch.randint(0, VOCAB, shape, generator=gen, dtype=torch.int64)
        elif n == "attention_mask":
            mask = torch.ones(shape, dtype=torch.int64)
            mask[1::2, shape[1] - shape[1] // 4:] = 0
            out[n] = mask
        else:
            out[n] = 2 * torch.rand(shape, generator=gen) - 1
    return out


def export(torch, name, model, inputs, path, opset=None):
    """Writes `model` to `path` as ONNX with the spec's exporter, the weights inside the file and
    the symbolic dims as dim_param. Returns the opset asked for (None: the exporter's default)."""
    spec = MODELS[name]
    args = tuple(inputs[n] for n, _ in spec.inputs)
    names = [n for n, _ in spec.inputs]
    if spec.exporter == "legacy":
        opset = opset or LEGACY_OPSET
        axes = {n: {i: d for i, d in enumerate(dims) if isinstance(d, str)} for n, dims in spec.inputs}
        axes[spec.output] = {0: "batch", 1: "seq"} if spec.family == "text" else {0: "batch"}
        torch.onnx.export(model, args, path, input_names=names, output_names=[spec.output], dynamic_axes=axes,
                          opset_version=opset, dynamo=False)
        return opset
    opset = opset or DYNAMO_OPSET
    Dim = torch.export.Dim
    symbols = {"batch": Dim("batch", min=2, max=4096), "seq": Dim("seq", min=2, max=MAX_POSITIONS),
               "h": Dim("h", min=1, max=64), "w": Dim("w", min=1, max=64),
               "samples": Dim("samples", min=400, max=160000)}

    def dynamic_dim(d):
        factor, _, symbol = d.rpartition("*")
        return int(factor) * symbols[symbol] if factor else symbols[symbol]

    dynamic = tuple({i: dynamic_dim(d) for i, d in enumerate(dims) if isinstance(d, str)} for _, dims in spec.inputs)
    kwargs = {} if opset is None else {"opset_version": opset}
    torch.onnx.export(model, args, path, input_names=names, output_names=[spec.output], dynamic_shapes=dynamic,
                      dynamo=True, external_data=False, **kwargs)
    return opset
