namespace Pvllm
{
    /// <summary>pvllm_status: why a call failed. Values are pinned by the C ABI and only appended.</summary>
    public enum PvllmStatus
    {
        Ok = 0,
        /// <summary>NULL, out of range, wrong struct_size.</summary>
        InvalidArgument = 1,
        /// <summary>File, tensor or request unknown.</summary>
        NotFound = 2,
        /// <summary>The OS refused a file.</summary>
        IoError = 3,
        /// <summary>Malformed or inconsistent model file.</summary>
        CorruptModel = 4,
        /// <summary>Valid, but this build cannot serve it.</summary>
        Unsupported = 5,
        /// <summary>Host/device memory or KV pool exhausted.</summary>
        OutOfMemory = 6,
        /// <summary>A bug in pvllm; please report.</summary>
        Internal = 7,
        /// <summary>Tokenizer missing or failed.</summary>
        TokenizerError = 8,
        /// <summary>An output buffer is too small.</summary>
        BufferTooSmall = 9,
        /// <summary>A wait ran out of time (since libpvllm 0.2; Engine.Wait returns false instead).</summary>
        Timeout = 10,
    }

    /// <summary>pvllm_delivery: who may take a request's outputs (since libpvllm 0.2).</summary>
    public enum Delivery
    {
        /// <summary>Engine.Poll (every shared request's outputs) and Engine.PollRequest on its id.</summary>
        Shared = 0,
        /// <summary>Only Engine.PollRequest / Engine.Wait on its id; Engine.Poll never returns them.</summary>
        PerRequest = 1,
    }

    /// <summary>pvllm_finish_reason: why a sample ended (None while it is still generating).</summary>
    public enum FinishReason
    {
        /// <summary>Still generating.</summary>
        None = 0,
        /// <summary>EOS, a stop token or a stop string.</summary>
        Stop = 1,
        /// <summary>max_tokens or the context length.</summary>
        Length = 2,
        /// <summary>Engine.Abort.</summary>
        Abort = 3,
        /// <summary>The engine failed this request; see Output.ErrorMessage.</summary>
        Error = 4,
    }
}
