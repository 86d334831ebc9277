using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Pvllm
{
    /// <summary>pvllm_logprob: a token and its log-probability.</summary>
    public struct TokenLogprob
    {
        public TokenLogprob(int tokenId, float logprob)
        {
            TokenId = tokenId;
            Logprob = logprob;
        }

        public int TokenId { get; }
        public float Logprob { get; }

        public override string ToString() => $"{TokenId}:{Logprob}";
    }

    /// <summary>pvllm_token_logprobs: the chosen token's log-probability and the top alternatives.</summary>
    public sealed class TokenLogprobs
    {
        internal TokenLogprobs(int tokenId, float logprob, IReadOnlyList<TokenLogprob> top)
        {
            TokenId = tokenId;
            Logprob = logprob;
            Top = top;
        }

        /// <summary>The chosen token.</summary>
        public int TokenId { get; }
        /// <summary>Its log-probability under the raw model distribution.</summary>
        public float Logprob { get; }
        /// <summary>The most likely alternatives, best first.</summary>
        public IReadOnlyList<TokenLogprob> Top { get; }
    }

    /// <summary>
    /// pvllm_output: the new tokens of one sample of one request. Every sample
    /// of every request ends with exactly one output whose FinishReason is not
    /// None, and the request's last output has RequestFinished. Copied out of
    /// the library's batch, so it lives as long as needed.
    /// </summary>
    public sealed class Output
    {
        internal Output(ulong requestId, int sampleIndex, IReadOnlyList<int> tokenIds, string text,
                        FinishReason finishReason, IReadOnlyList<TokenLogprobs> logprobs, string errorMessage,
                        bool requestFinished, ulong sequence, IReadOnlyList<TokenLogprobs> promptLogprobs = null,
                        double score = 0, RequestMetrics metrics = null)
        {
            PromptLogprobs = promptLogprobs;
            Score = score;
            Metrics = metrics;
            RequestId = requestId;
            SampleIndex = sampleIndex;
            TokenIds = tokenIds;
            Text = text;
            FinishReason = finishReason;
            Logprobs = logprobs;
            ErrorMessage = errorMessage;
            RequestFinished = requestFinished;
            Sequence = sequence;
        }

        public ulong RequestId { get; }
        /// <summary>0..n-1.</summary>
        public int SampleIndex { get; }
        /// <summary>New tokens since the previous output of this sample.</summary>
        public IReadOnlyList<int> TokenIds { get; }
        /// <summary>Their text; never a broken character.</summary>
        public string Text { get; }
        public FinishReason FinishReason { get; }
        public bool IsFinished => FinishReason != FinishReason.None;
        /// <summary>One entry per token id, or null when logprobs were not asked for.</summary>
        public IReadOnlyList<TokenLogprobs> Logprobs { get; }
        /// <summary>"" unless FinishReason is Error.</summary>
        public string ErrorMessage { get; }
        /// <summary>
        /// The request's last output: every sample has finished and nothing more
        /// comes for the request (pvllm_output.request_finished).
        /// </summary>
        public bool RequestFinished { get; }
        /// <summary>
        /// The output's place among its request's outputs (all samples): 0, 1, 2,
        /// ... in the order the engine made them; sorting outputs that several
        /// threads took by it restores that order (pvllm_output.sequence).
        /// </summary>
        public ulong Sequence { get; }
        /// <summary>
        /// On the request's first output when it asked for prompt logprobs: entry i
        /// for prompt token i + 1; null otherwise. Since 0.5.
        /// </summary>
        public IReadOnlyList<TokenLogprobs> PromptLogprobs { get; }
        /// <summary>Beam search: the hypothesis' score; 0 otherwise. Since 0.5.</summary>
        public double Score { get; }
        /// <summary>On the request's last output: its timing and token counts; null on the others. Since 0.5.</summary>
        public RequestMetrics Metrics { get; }

        /// <summary>The library's name of a finish reason ("PVLLM_FINISH_STOP", ...).</summary>
        public static string FinishReasonName(FinishReason reason)
            => Utf8.FromNative(NativeMethods.pvllm_finish_reason_to_string((int)reason));

        public override string ToString()
            => $"Output(request {RequestId}, sample {SampleIndex}, {TokenIds.Count} tokens, {FinishReason}" +
               (RequestFinished ? ", request finished)" : ")");

        /// <summary>Copies the pvllm_output at `p` (a const pvllm_output*).</summary>
        internal static Output FromNative(IntPtr p)
        {
            var o = Marshal.PtrToStructure<NativeMethods.pvllm_output>(p);
            int numTokens = checked((int)o.num_token_ids.ToUInt64());
            var ids = new int[numTokens];
            if (numTokens > 0) Marshal.Copy(o.token_ids, ids, 0, numTokens);
            string text = Utf8.FromNative(o.text, checked((int)o.text_len.ToUInt64()));
            TokenLogprobs[] logprobs = o.logprobs != IntPtr.Zero ? CopyLogprobs(o.logprobs, numTokens) : null;
            TokenLogprobs[] promptLogprobs = o.prompt_logprobs != IntPtr.Zero
                ? CopyLogprobs(o.prompt_logprobs, checked((int)o.num_prompt_logprobs.ToUInt64()))
                : null;
            RequestMetrics metrics = o.request_finished != 0
                ? new RequestMetrics(o.time_queued, o.time_to_first_token, o.time_per_output_token, o.e2e_latency,
                                     o.num_prompt_tokens, o.num_prefill_tokens, o.num_cached_prompt_tokens,
                                     o.num_generated_tokens)
                : null;
            // Engine.Create refuses a library older than 0.5, so struct_size
            // covers every field read here.
            return new Output(o.request_id, o.sample_index, ids, text, (FinishReason)o.finish_reason,
                              logprobs, Utf8.FromNative(o.error_message), o.request_finished != 0,
                              o.sequence, promptLogprobs, o.score, metrics);
        }

        // Copies `count` pvllm_token_logprobs at `p` (a const pvllm_token_logprobs*).
        private static TokenLogprobs[] CopyLogprobs(IntPtr p, int count)
        {
            var result = new TokenLogprobs[count];
            int size = Marshal.SizeOf(typeof(NativeMethods.pvllm_token_logprobs));
            int topSize = Marshal.SizeOf(typeof(NativeMethods.pvllm_logprob));
            for (int i = 0; i < count; i++)
            {
                var lp = Marshal.PtrToStructure<NativeMethods.pvllm_token_logprobs>(IntPtr.Add(p, i * size));
                var top = new TokenLogprob[checked((int)lp.num_top.ToUInt64())];
                for (int k = 0; k < top.Length; k++)
                {
                    var t = Marshal.PtrToStructure<NativeMethods.pvllm_logprob>(IntPtr.Add(lp.top, k * topSize));
                    top[k] = new TokenLogprob(t.token_id, t.logprob);
                }
                result[i] = new TokenLogprobs(lp.token_id, lp.logprob, top);
            }
            return result;
        }
    }

    /// <summary>
    /// A request's timing, in seconds from its submission, and its token counts:
    /// pvllm_output's fields on the request's last output. Since 0.5.
    /// </summary>
    public sealed class RequestMetrics
    {
        internal RequestMetrics(double timeQueued, double timeToFirstToken, double timePerOutputToken,
                                double e2eLatency, long numPromptTokens, long numPrefillTokens,
                                long numCachedPromptTokens, long numGeneratedTokens)
        {
            TimeQueued = timeQueued;
            TimeToFirstToken = timeToFirstToken;
            TimePerOutputToken = timePerOutputToken;
            E2eLatency = e2eLatency;
            NumPromptTokens = numPromptTokens;
            NumPrefillTokens = numPrefillTokens;
            NumCachedPromptTokens = numCachedPromptTokens;
            NumGeneratedTokens = numGeneratedTokens;
        }

        /// <summary>To the first step that ran any of its tokens.</summary>
        public double TimeQueued { get; }
        /// <summary>To the end of the step of its first token; 0 if none.</summary>
        public double TimeToFirstToken { get; }
        /// <summary>Mean gap between its token steps after the first.</summary>
        public double TimePerOutputToken { get; }
        /// <summary>To the end of its last step.</summary>
        public double E2eLatency { get; }
        public long NumPromptTokens { get; }
        /// <summary>Prompt tokens computed, recomputation included.</summary>
        public long NumPrefillTokens { get; }
        /// <summary>Prompt tokens the prefix cache spared.</summary>
        public long NumCachedPromptTokens { get; }
        /// <summary>Over all its samples.</summary>
        public long NumGeneratedTokens { get; }
    }

    /// <summary>One finished sample of a GenerateAsync call: all its outputs joined.</summary>
    public sealed class Sample
    {
        internal Sample(int index, IReadOnlyList<int> tokenIds, string text, FinishReason finishReason,
                        IReadOnlyList<TokenLogprobs> logprobs, string errorMessage, double score = 0)
        {
            Score = score;
            Index = index;
            TokenIds = tokenIds;
            Text = text;
            FinishReason = finishReason;
            Logprobs = logprobs;
            ErrorMessage = errorMessage;
        }

        public int Index { get; }
        public IReadOnlyList<int> TokenIds { get; }
        public string Text { get; }
        public FinishReason FinishReason { get; }
        /// <summary>One entry per token, or null when logprobs were not asked for.</summary>
        public IReadOnlyList<TokenLogprobs> Logprobs { get; }
        /// <summary>"" unless FinishReason is Error.</summary>
        public string ErrorMessage { get; }
        /// <summary>Beam search: the hypothesis' score; 0 otherwise.</summary>
        public double Score { get; }
    }

    /// <summary>The result of GenerateAsync: every sample of one request, by index.</summary>
    public sealed class Generation
    {
        internal Generation(ulong requestId, IReadOnlyList<Sample> samples,
                            IReadOnlyList<TokenLogprobs> promptLogprobs = null, RequestMetrics metrics = null)
        {
            RequestId = requestId;
            Samples = samples;
            PromptLogprobs = promptLogprobs;
            Metrics = metrics;
        }

        public ulong RequestId { get; }
        public IReadOnlyList<Sample> Samples { get; }
        /// <summary>The prompt's logprobs when the request asked for them (Output.PromptLogprobs).</summary>
        public IReadOnlyList<TokenLogprobs> PromptLogprobs { get; }
        /// <summary>From the request's last output.</summary>
        public RequestMetrics Metrics { get; }
        /// <summary>Samples[0].Text: the text of a request with n = 1.</summary>
        public string Text => Samples[0].Text;
    }
}
