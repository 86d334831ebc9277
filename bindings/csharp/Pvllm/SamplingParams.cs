using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;

namespace Pvllm
{
    /// <summary>
    /// pvllm_sampling_params. A new instance holds the library's defaults
    /// (pvllm_sampling_params_init); the library validates the values at submit.
    /// </summary>
    public sealed class SamplingParams
    {
        public SamplingParams()
        {
            var p = NativeStruct.Init<NativeMethods.pvllm_sampling_params>(NativeMethods.pvllm_sampling_params_init);
            Temperature = p.temperature;
            TopK = p.top_k;
            TopP = p.top_p;
            MinP = p.min_p;
            RepetitionPenalty = p.repetition_penalty;
            PresencePenalty = p.presence_penalty;
            FrequencyPenalty = p.frequency_penalty;
            MaxTokens = p.max_tokens;
            IgnoreEos = p.ignore_eos != 0;
            Logprobs = p.logprobs;
            Seed = p.has_seed != 0 ? p.seed : (ulong?)null;
            N = p.n;
            PromptLogprobs = checked((int)p.prompt_logprobs);
            BeamWidth = p.beam_width;
            LengthPenalty = p.length_penalty;
            EarlyStopping = (EarlyStopping)p.early_stopping;
        }

        /// <summary>Greedy decoding (temperature 0) of at most `maxTokens` tokens.</summary>
        public static SamplingParams Greedy(int maxTokens)
            => new SamplingParams { Temperature = 0f, MaxTokens = maxTokens };

        /// <summary>0 = greedy; default 1.</summary>
        public float Temperature { get; set; }
        /// <summary>0 = off (default).</summary>
        public int TopK { get; set; }
        /// <summary>(0, 1]; 1 = off (default).</summary>
        public float TopP { get; set; }
        /// <summary>[0, 1]; 0 = off (default).</summary>
        public float MinP { get; set; }
        /// <summary>&gt; 0; 1 = off (default).</summary>
        public float RepetitionPenalty { get; set; }
        public float PresencePenalty { get; set; }
        public float FrequencyPenalty { get; set; }
        /// <summary>&gt;= 1; default 16.</summary>
        public int MaxTokens { get; set; }
        /// <summary>Extra token ids that end generation.</summary>
        public IList<int> StopTokenIds { get; set; } = new List<int>();
        /// <summary>
        /// Stop strings; the matched string is not part of the output. Submit
        /// throws PvllmException InvalidArgument for one holding a NUL
        /// character (C would cut it there) and ArgumentException for a null one.
        /// </summary>
        public IList<string> Stop { get; set; } = new List<string>();
        /// <summary>Do not stop at EOS (nor the model's extra stop ids).</summary>
        public bool IgnoreEos { get; set; }
        /// <summary>-1 none (default); 0 the chosen token; k: plus the top k (&lt;= 20).</summary>
        public int Logprobs { get; set; }
        /// <summary>A fixed seed; null = a random one.</summary>
        public ulong? Seed { get; set; }
        /// <summary>Parallel samples, 1..max_num_seqs; default 1.</summary>
        public int N { get; set; }
        /// <summary>
        /// -1 none (default); 0 each prompt token's logprob (all but the first);
        /// k &lt;= 20: plus the top k. They come with the request's first output
        /// (Output.PromptLogprobs). Since 0.5.
        /// </summary>
        public int PromptLogprobs { get; set; }
        /// <summary>
        /// Beam search with this many beams (1..10; 0 = off, the default): the
        /// best N hypotheses come back as samples, best first, each in one output
        /// with its Score. Temperature must be 0 and the other shaping off. Since 0.5.
        /// </summary>
        public int BeamWidth { get; set; }
        /// <summary>A hypothesis scores its logprob sum / length^LengthPenalty; default 1.</summary>
        public float LengthPenalty { get; set; }
        /// <summary>When beam search stops; default Heuristic.</summary>
        public EarlyStopping EarlyStopping { get; set; }
        /// <summary>
        /// Structured output: the generated text matches this constraint (a JSON
        /// schema, any JSON object, a GBNF grammar, a regular expression or one
        /// of a list of choices); null (the default) leaves it free. See
        /// <see cref="Pvllm.Constraint"/>. Since 0.6.
        /// </summary>
        public Constraint Constraint { get; set; }

        /// <summary>The C struct; its pointers live in `scope`.</summary>
        internal NativeMethods.pvllm_sampling_params ToNative(NativeScope scope)
        {
            var p = NativeStruct.Init<NativeMethods.pvllm_sampling_params>(NativeMethods.pvllm_sampling_params_init);
            p.temperature = Temperature;
            p.top_k = TopK;
            p.top_p = TopP;
            p.min_p = MinP;
            p.repetition_penalty = RepetitionPenalty;
            p.presence_penalty = PresencePenalty;
            p.frequency_penalty = FrequencyPenalty;
            p.max_tokens = MaxTokens;
            p.stop_token_ids = scope.Int32Array(StopTokenIds);
            p.num_stop_token_ids = (UIntPtr)(uint)(StopTokenIds?.Count ?? 0);
            p.stop = scope.Utf8StringArray(Stop, "a stop string");
            p.num_stop = (UIntPtr)(uint)(Stop?.Count ?? 0);
            p.ignore_eos = IgnoreEos ? (byte)1 : (byte)0;
            p.logprobs = Logprobs;
            p.has_seed = Seed.HasValue ? (byte)1 : (byte)0;
            p.seed = Seed ?? 0;
            p.n = N;
            p.prompt_logprobs = PromptLogprobs;
            p.beam_width = BeamWidth;
            p.length_penalty = LengthPenalty;
            p.early_stopping = (int)EarlyStopping;
            if (Constraint != null)
            {
                p.constraint_kind = (int)Constraint.Kind;
                p.constraint = scope.NulFreeUtf8String(Constraint.Text, "the constraint's text");
                p.choices = scope.Utf8StringArray(Constraint.ChoiceList, "a choice");
                p.num_choices = (UIntPtr)(uint)Constraint.Choices.Count;
                if (Constraint.JsonOptions != JsonOptions.None)
                {
                    // An older library would ignore the field.
                    Library.Require(NativeMethods.VersionNumber011, "Constraint.JsonOptions");
                    p.constraint_flags = (uint)Constraint.JsonOptions;
                }
            }
            return p;
        }
    }

    /// <summary>pvllm_constraint_kind: what a <see cref="Constraint"/> holds. Since 0.6.</summary>
    public enum ConstraintKind
    {
        /// <summary>JSON that validates against a JSON schema.</summary>
        JsonSchema = 1,
        /// <summary>Any JSON object.</summary>
        JsonObject = 2,
        /// <summary>A GBNF grammar (rules `name ::= ...`, the text starts at `root`).</summary>
        Grammar = 3,
        /// <summary>A regular expression the whole text matches.</summary>
        Regex = 4,
        /// <summary>Exactly one of a list of strings.</summary>
        Choice = 5,
    }

    /// <summary>
    /// pvllm_constraint_flag: how the JSON constraints read JSON
    /// (<see cref="Constraint.JsonSchema(string, JsonOptions)"/>,
    /// <see cref="Constraint.JsonObject(JsonOptions)"/>). Since 0.11; a
    /// library older than that is refused (PvllmStatus.Unsupported) rather
    /// than left to ignore them.
    /// </summary>
    [Flags]
    public enum JsonOptions
    {
        /// <summary>Compact JSON; an object whose schema lists properties gets only those, in that order.</summary>
        None = 0,
        /// <summary>JSON's whitespace (space, tab, newline, carriage return) between tokens, as in pretty-printed JSON.</summary>
        Whitespace = 1,
        /// <summary>
        /// JsonSchema: members the schema does not list may follow the listed
        /// ones wherever its additionalProperties (or patternProperties) allows
        /// them, as JSON Schema reads it. Any object takes any member already,
        /// so JsonObject is unchanged by it.
        /// </summary>
        UnlistedProperties = 2,
        /// <summary>
        /// JsonSchema: an object's members may come in any order, each at most
        /// once and the required ones present, as JSON Schema reads objects;
        /// without it they come in the order the schema lists them. Any object
        /// takes its members in any order already, so JsonObject is unchanged
        /// by it.
        /// </summary>
        AnyOrder = 4,
    }

    /// <summary>
    /// What the generated text must match (SamplingParams.Constraint, since
    /// 0.6): each draw is limited to the tokens that can continue a match, and
    /// end-of-sequence only once the text is complete; a constraint that allows
    /// nothing more ends the sample with FinishReason.Stop. A text cut short by
    /// MaxTokens or a stop string is a prefix of a match. Made by the static
    /// methods, one kind each, and immutable.
    ///
    /// The library compiles the constraint at submit: a malformed one throws
    /// PvllmException with PvllmStatus.InvalidArgument and a message saying
    /// where it goes wrong, one that uses something the library does not
    /// implement PvllmStatus.Unsupported naming it; text with a NUL character
    /// is InvalidArgument before the library sees it, as is a stop string
    /// with one. It needs the model's tokenizer and cannot be combined with
    /// beam search.
    /// </summary>
    public sealed class Constraint
    {
        private static readonly ReadOnlyCollection<string> NoChoices = new ReadOnlyCollection<string>(new string[0]);

        private Constraint(ConstraintKind kind, string text, ReadOnlyCollection<string> choices,
                           JsonOptions jsonOptions = JsonOptions.None)
        {
            Kind = kind;
            Text = text;
            ChoiceList = choices ?? NoChoices;
            JsonOptions = jsonOptions;
        }

        /// <summary>Which kind of constraint this is.</summary>
        public ConstraintKind Kind { get; }
        /// <summary>The JSON schema, grammar or regular expression; null for JsonObject and Choice.</summary>
        public string Text { get; }
        /// <summary>Choice: the strings the text may be; empty otherwise.</summary>
        public IReadOnlyList<string> Choices => ChoiceList;
        internal ReadOnlyCollection<string> ChoiceList { get; }
        /// <summary>JsonSchema, JsonObject: how they read JSON; None for the other kinds. Since 0.11.</summary>
        public JsonOptions JsonOptions { get; }

        /// <summary>
        /// Compact JSON that validates against `schema` (docs/structured-output.md
        /// lists the keywords the library implements).
        /// </summary>
        public static Constraint JsonSchema(string schema) => JsonSchema(schema, JsonOptions.None);

        /// <summary>JSON that validates against `schema`, read as `options` say. Since 0.11.</summary>
        public static Constraint JsonSchema(string schema, JsonOptions options)
            => new Constraint(ConstraintKind.JsonSchema, schema ?? throw new ArgumentNullException(nameof(schema)), null, options);

        /// <summary>Any JSON object, compact.</summary>
        public static Constraint JsonObject() => JsonObject(JsonOptions.None);

        /// <summary>Any JSON object, read as `options` say. Since 0.11.</summary>
        public static Constraint JsonObject(JsonOptions options)
            => new Constraint(ConstraintKind.JsonObject, null, null, options);

        /// <summary>A GBNF grammar (rules `name ::= ...`; the text starts at `root`).</summary>
        public static Constraint Grammar(string gbnf)
            => new Constraint(ConstraintKind.Grammar, gbnf ?? throw new ArgumentNullException(nameof(gbnf)), null);

        /// <summary>A regular expression the whole text matches.</summary>
        public static Constraint Regex(string pattern)
            => new Constraint(ConstraintKind.Regex, pattern ?? throw new ArgumentNullException(nameof(pattern)), null);

        /// <summary>The text is exactly one of `choices` (copied).</summary>
        public static Constraint Choice(IEnumerable<string> choices)
        {
            if (choices == null) throw new ArgumentNullException(nameof(choices));
            var copy = new List<string>(choices);
            if (copy.Contains(null)) throw new ArgumentException("a choice must not be null", nameof(choices));
            return new Constraint(ConstraintKind.Choice, null, copy.AsReadOnly());
        }

        /// <summary>The text is exactly one of `choices` (copied).</summary>
        public static Constraint Choice(params string[] choices) => Choice((IEnumerable<string>)choices);

        public override string ToString()
            => Kind == ConstraintKind.Choice ? "Choice(" + string.Join(", ", Choices) + ")"
             : (Text == null ? Kind.ToString() : Kind + "(" + Text + ")")
               + (JsonOptions == JsonOptions.None ? "" : " [" + JsonOptions + "]");
    }

    /// <summary>pvllm_early_stopping: when beam search stops, as Hugging Face's False, True and "never".</summary>
    public enum EarlyStopping
    {
        /// <summary>When no live beam can beat the worst finished hypothesis at the current length.</summary>
        Heuristic = 0,
        /// <summary>As soon as beam_width hypotheses are finished.</summary>
        True = 1,
        /// <summary>As Heuristic, over the longest length a beam may reach (length_penalty &gt; 0).</summary>
        Never = 2,
    }

    /// <summary>
    /// pvllm_request: a prompt (text, tokenized with the special tokens the
    /// tokenizer adds, such as BOS, unless AddSpecialTokens is false; or token
    /// ids used as given), sampling parameters and a priority.
    /// </summary>
    public sealed class Request
    {
        public Request(string promptText, SamplingParams sampling = null, int priority = 0)
        {
            PromptText = promptText ?? throw new ArgumentNullException(nameof(promptText));
            Sampling = sampling;
            Priority = priority;
        }

        public Request(IReadOnlyList<int> promptTokenIds, SamplingParams sampling = null, int priority = 0)
        {
            PromptTokenIds = promptTokenIds ?? throw new ArgumentNullException(nameof(promptTokenIds));
            Sampling = sampling;
            Priority = priority;
        }

        public string PromptText { get; }
        public IReadOnlyList<int> PromptTokenIds { get; }
        /// <summary>null = the library's defaults.</summary>
        public SamplingParams Sampling { get; set; }
        /// <summary>Lower values are served first and preempted last; default 0.</summary>
        public int Priority { get; set; }
        /// <summary>
        /// true (default): PromptText is tokenized with the special tokens the
        /// tokenizer puts around a text (BOS for Llama-style tokenizers, none
        /// for Qwen's), as Hugging Face's add_special_tokens. false: none are
        /// added; special tokens written in the text still count. Use false for
        /// a prompt rendered by a chat template, which writes its own BOS
        /// (Engine.ChatRequest does). Ignored for PromptTokenIds. false needs
        /// libpvllm 0.9 (Submit throws PvllmException Unsupported before).
        /// </summary>
        public bool AddSpecialTokens { get; set; } = true;

        /// <summary>How many samples (and so final outputs) the request produces.</summary>
        internal int NumSamples => Sampling?.N ?? 1;

        internal NativeMethods.pvllm_request ToNative(NativeScope scope, Delivery delivery)
        {
            var r = NativeStruct.Init<NativeMethods.pvllm_request>(NativeMethods.pvllm_request_init);
            r.prompt_text = scope.Utf8String(PromptText);
            if (PromptTokenIds != null)
            {
                var ids = new int[PromptTokenIds.Count];
                for (int i = 0; i < ids.Length; i++) ids[i] = PromptTokenIds[i];
                r.prompt_token_ids = scope.Int32Array(ids);
                r.num_prompt_token_ids = (UIntPtr)(uint)ids.Length;
            }
            if (Sampling != null) r.sampling = scope.Struct(Sampling.ToNative(scope));
            r.priority = Priority;
            r.delivery = (long)delivery;
            if (!AddSpecialTokens && PromptText != null)
            {
                // An older library would ignore the field and add them.
                Library.Require(NativeMethods.VersionNumber09, "Request.AddSpecialTokens = false");
            }
            r.add_special_tokens = AddSpecialTokens ? (byte)1 : (byte)0;
            return r;
        }
    }
}
