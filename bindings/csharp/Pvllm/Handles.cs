using System;
using Microsoft.Win32.SafeHandles;

namespace Pvllm
{
    // SafeHandles keep each native object alive while a P/Invoke call uses it
    // (the marshaller adds a reference for the call's duration), so Dispose on
    // one thread never frees an engine that another thread is stepping:
    // pvllm_engine_destroy runs once the last call has returned.

    /// <summary>pvllm_engine*, destroyed with pvllm_engine_destroy.</summary>
    internal sealed class EngineHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public EngineHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.pvllm_engine_destroy(handle);
            return true;
        }
    }

    /// <summary>pvllm_output_batch*, freed with pvllm_output_batch_free.</summary>
    internal sealed class OutputBatchHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public OutputBatchHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.pvllm_output_batch_free(handle);
            return true;
        }
    }

    /// <summary>pvllm_model_info*, freed with pvllm_model_info_free.</summary>
    internal sealed class ModelInfoHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public ModelInfoHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.pvllm_model_info_free(handle);
            return true;
        }
    }

    /// <summary>pvllm_tokenizer*, freed with pvllm_tokenizer_free (since 0.9).</summary>
    internal sealed class TokenizerHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public TokenizerHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.pvllm_tokenizer_free(handle);
            return true;
        }
    }
}
