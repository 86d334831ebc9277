using System;
using System.Collections.Generic;

namespace Pvllm
{
    /// <summary>pvllm_tensor_info: one tensor of a model's table.</summary>
    public sealed class TensorInfo
    {
        internal TensorInfo(string name, string dtype, IReadOnlyList<long> shape)
        {
            Name = name;
            DType = dtype;
            Shape = shape;
        }

        public string Name { get; }
        /// <summary>"F32", "F16" or "BF16".</summary>
        public string DType { get; }
        public IReadOnlyList<long> Shape { get; }
    }

    /// <summary>
    /// A model's config and tensor table read without loading weights
    /// (pvllm_model_inspect). Everything is copied out, so nothing needs disposing.
    /// </summary>
    public sealed class ModelInfo
    {
        private ModelInfo() { }

        public string Architecture { get; private set; }
        /// <summary>"huggingface", "llama2c" or "pvllm".</summary>
        public string Format { get; private set; }
        public int HiddenSize { get; private set; }
        public int IntermediateSize { get; private set; }
        public int NumLayers { get; private set; }
        public int NumHeads { get; private set; }
        public int NumKvHeads { get; private set; }
        public int HeadDim { get; private set; }
        public int VocabSize { get; private set; }
        public int MaxPositionEmbeddings { get; private set; }
        public float RmsNormEps { get; private set; }
        public float RopeTheta { get; private set; }
        public bool TieWordEmbeddings { get; private set; }
        public int BosTokenId { get; private set; }
        public int EosTokenId { get; private set; }
        public IReadOnlyList<TensorInfo> Tensors { get; private set; }

        /// <summary>Reads the model at `modelPath`; throws PvllmException (NotFound, IoError, CorruptModel, ...).</summary>
        public static ModelInfo Inspect(string modelPath)
        {
            if (modelPath == null) throw new ArgumentNullException(nameof(modelPath));
            IntPtr error;
            ModelInfoHandle handle;
            PvllmStatus status = NativeMethods.pvllm_model_inspect(Utf8.ToNulTerminated(modelPath), out handle, out error);
            PvllmException.Check(status, error);
            return FromHandle(handle);
        }

        /// <summary>The config and tensor table of a random-weights shape, allocating no weight.</summary>
        public static ModelInfo InspectRandom(string shape)
        {
            if (shape == null) throw new ArgumentNullException(nameof(shape));
            IntPtr error;
            ModelInfoHandle handle;
            PvllmStatus status = NativeMethods.pvllm_model_inspect_random(Utf8.ToNulTerminated(shape), out handle, out error);
            PvllmException.Check(status, error);
            return FromHandle(handle);
        }

        private static unsafe ModelInfo FromHandle(ModelInfoHandle handle)
        {
            IntPtr error;
            using (handle)
            {
                var c = NativeStruct.Init<NativeMethods.pvllm_model_config>(NativeMethods.pvllm_model_config_init);
                PvllmException.Check(NativeMethods.pvllm_model_info_config(handle, ref c, out error), error);
                var info = new ModelInfo
                {
                    Architecture = FixedString(c.architecture, 32),
                    Format = FixedString(c.format, 32),
                    HiddenSize = c.hidden_size,
                    IntermediateSize = c.intermediate_size,
                    NumLayers = c.num_layers,
                    NumHeads = c.num_heads,
                    NumKvHeads = c.num_kv_heads,
                    HeadDim = c.head_dim,
                    VocabSize = c.vocab_size,
                    MaxPositionEmbeddings = c.max_position_embeddings,
                    RmsNormEps = c.rms_norm_eps,
                    RopeTheta = c.rope_theta,
                    TieWordEmbeddings = c.tie_word_embeddings != 0,
                    BosTokenId = c.bos_token_id,
                    EosTokenId = c.eos_token_id,
                };
                ulong count = NativeMethods.pvllm_model_info_num_tensors(handle).ToUInt64();
                var tensors = new List<TensorInfo>((int)count);
                for (ulong i = 0; i < count; i++)
                {
                    NativeMethods.pvllm_tensor_info t;
                    PvllmException.Check(
                        NativeMethods.pvllm_model_info_tensor(handle, (UIntPtr)i, out t, out error), error);
                    var shape = new long[Math.Max(0, Math.Min(t.num_dims, 4))];
                    for (int d = 0; d < shape.Length; d++) shape[d] = t.shape[d];
                    tensors.Add(new TensorInfo(Utf8.FromNative(t.name), Utf8.FromNative(t.dtype), shape));
                }
                info.Tensors = tensors;
                return info;
            }
        }

        // A char[capacity] field: NUL-terminated unless it fills the array.
        private static unsafe string FixedString(byte* chars, int capacity)
        {
            int length = 0;
            while (length < capacity && chars[length] != 0) length++;
            return Utf8.FromNative((IntPtr)chars, length);
        }
    }
}
