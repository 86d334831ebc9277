using System;
using System.Collections.Generic;

namespace Pvllm
{
    /// <summary>
    /// pvllm_tokenizer_info: what a <see cref="Tokenizer"/> is. Copied out of
    /// the library, so it outlives the tokenizer. Since 0.9.
    /// </summary>
    public sealed class TokenizerInfo
    {
        internal TokenizerInfo(NativeMethods.pvllm_tokenizer_info i)
        {
            VocabSize = i.vocab_size;
            BosId = i.bos_id;
            EosId = i.eos_id;
            BosToken = Utf8.FromNative(i.bos_token);
            EosToken = Utf8.FromNative(i.eos_token);
            Kind = Utf8.FromNative(i.kind);
            Source = Utf8.FromNative(i.source);
            AddsBos = i.adds_bos != 0;
            HasChatTemplate = i.has_chat_template != 0;
        }

        /// <summary>One past the largest id (added tokens included); 0 for chat templates alone.</summary>
        public int VocabSize { get; }
        /// <summary>The BOS id; -1 when there is none.</summary>
        public int BosId { get; }
        /// <summary>The EOS id; -1 when there is none.</summary>
        public int EosId { get; }
        /// <summary>
        /// The BOS text the chat templates read (tokenizer_config.json's
        /// bos_token), else the tokenizer's own BOS token's; "" when there is none.
        /// </summary>
        public string BosToken { get; }
        /// <summary>
        /// The EOS text the chat templates read, else the tokenizer's own; ""
        /// when there is none. A chat model's eos_token ends a turn
        /// ("&lt;|im_end|&gt;", "&lt;/s&gt;"): a stop string for a chat.
        /// </summary>
        public string EosToken { get; }
        /// <summary>"sentencepiece" (tokenizer.model) or "tokenizer.json"; "" for chat templates alone.</summary>
        public string Kind { get; }
        /// <summary>The file it was read from, or the .pvllm file that carries it; "" for chat templates alone.</summary>
        public string Source { get; }
        /// <summary>Whether Encode(text, addSpecialTokens: true) puts BOS first.</summary>
        public bool AddsBos { get; }
        /// <summary>Whether the model has a chat template of its own.</summary>
        public bool HasChatTemplate { get; }

        public override string ToString() => $"{Kind} tokenizer, {VocabSize} ids ({Source})";
    }

    /// <summary>
    /// A model's tokenizer and chat templates, read without its weights
    /// (pvllm_tokenizer, since libpvllm 0.9): what a tool that tokenizes,
    /// counts tokens or renders a chat template needs, in milliseconds rather
    /// than the seconds an Engine takes to create. It gives the same ids as
    /// an engine over the same path (Engine.Tokenize, Engine.Detokenize,
    /// Engine.ApplyChatTemplate).
    ///
    /// Immutable: any thread may use it, several at once. Dispose frees it
    /// once the calls in flight have returned (the SafeHandle counts them)
    /// and may be called twice; later calls throw ObjectDisposedException.
    /// </summary>
    public sealed class Tokenizer : IDisposable
    {
        private readonly TokenizerHandle handle;

        private Tokenizer(TokenizerHandle handle, TokenizerInfo info)
        {
            this.handle = handle;
            Info = info;
        }

        /// <summary>
        /// Opens the tokenizer (and the chat templates beside it) of the model
        /// at `modelPath`: any path Engine.Create accepts (a Hugging Face
        /// folder, a llama2.c .bin with its tokenizer beside it, a .pvllm
        /// file), or a tokenizer.model / tokenizer.json file or a folder
        /// holding only a tokenizer. A folder with chat templates but no
        /// tokenizer opens too: it renders them, and Encode and Decode throw
        /// TokenizerError. Throws PvllmException: NotFound (no such path, or
        /// neither a tokenizer nor chat templates there: the message names
        /// what was looked for), InvalidArgument (an empty path, one holding a
        /// NUL, a folder with several models), Unsupported (a file of another
        /// kind, or a libpvllm older than 0.9), IoError, CorruptModel,
        /// TokenizerError (an unreadable or malformed tokenizer).
        /// </summary>
        public static Tokenizer Open(string modelPath)
        {
            if (modelPath == null) throw new ArgumentNullException(nameof(modelPath));
            Library.CheckAbi();
            Library.Require(NativeMethods.VersionNumber09, "Tokenizer");
            Utf8.NulFree(modelPath, "the model path");
            TokenizerHandle handle;
            IntPtr error;
            PvllmStatus status = NativeMethods.pvllm_tokenizer_open(Utf8.ToNulTerminated(modelPath), out handle,
                                                                    out error);
            PvllmException.Check(status, error);
            try
            {
                var i = NativeStruct.Init<NativeMethods.pvllm_tokenizer_info>(NativeMethods.pvllm_tokenizer_info_init);
                PvllmException.Check(NativeMethods.pvllm_tokenizer_get_info(handle, ref i, out error), error);
                return new Tokenizer(handle, new TokenizerInfo(i));
            }
            catch
            {
                handle.Dispose();
                throw;
            }
        }

        /// <summary>What the tokenizer is (read once at Open; still there after Dispose).</summary>
        public TokenizerInfo Info { get; }

        /// <summary>Frees the tokenizer. Safe to call more than once.</summary>
        public void Dispose() => handle.Dispose();

        public bool IsDisposed => handle.IsClosed;

        /// <summary>
        /// Encodes `text`; with `addSpecialTokens` the special tokens the
        /// tokenizer puts around a text come too (BOS for Llama-style
        /// tokenizers, see Info.AddsBos), as Hugging Face's add_special_tokens
        /// and a Request's default. Special tokens written in the text count
        /// either way. The default false matches Engine.Tokenize. Throws
        /// PvllmException: InvalidArgument for text holding a NUL character,
        /// TokenizerError for a tokenizer that holds chat templates only.
        /// </summary>
        public int[] Encode(string text, bool addSpecialTokens = false)
        {
            if (text == null) throw new ArgumentNullException(nameof(text));
            ThrowIfDisposed();
            byte[] utf8 = Utf8.ToNulTerminated(Utf8.NulFree(text, "the text"));
            return IdBuffer.Read(utf8, (int[] ids, UIntPtr capacity, out UIntPtr count, out IntPtr error) =>
                NativeMethods.pvllm_tokenizer_encode(handle, utf8, addSpecialTokens ? (byte)1 : (byte)0, ids,
                    capacity, out count, out error));
        }

        /// <summary>
        /// Decodes token ids into text, as Engine.Detokenize. Throws
        /// PvllmException: InvalidArgument for an id outside the vocabulary,
        /// TokenizerError for a tokenizer that holds chat templates only.
        /// </summary>
        public string Decode(IReadOnlyList<int> ids)
        {
            if (ids == null) throw new ArgumentNullException(nameof(ids));
            ThrowIfDisposed();
            var copy = new int[ids.Count];
            for (int i = 0; i < copy.Length; i++) copy[i] = ids[i];
            return TextBuffer.Read(16 * copy.Length + 16,
                (byte[] text, UIntPtr capacity, out UIntPtr length, out IntPtr error) =>
                    NativeMethods.pvllm_tokenizer_decode(handle, copy, (UIntPtr)(uint)copy.Length, text, capacity,
                        out length, out error));
        }

        /// <summary>
        /// Renders the model's chat template over `messagesJson` as
        /// Engine.ApplyChatTemplate does (the same text, errors and options,
        /// ChatTemplateOptions.ChatTemplate included). To generate from it,
        /// submit it with Request.AddSpecialTokens = false: the text already
        /// starts with its BOS.
        /// </summary>
        public string ApplyChatTemplate(string messagesJson, ChatTemplateOptions options = null)
        {
            if (messagesJson == null) throw new ArgumentNullException(nameof(messagesJson));
            ThrowIfDisposed();
            using (var scope = new NativeScope())
            {
                var p = (options ?? new ChatTemplateOptions()).ToNative(scope, messagesJson);
                return TextBuffer.Read(256,
                    (byte[] text, UIntPtr capacity, out UIntPtr length, out IntPtr error) =>
                        NativeMethods.pvllm_tokenizer_apply_chat_template(handle, ref p, text, capacity,
                            out length, out error));
            }
        }

        private void ThrowIfDisposed()
        {
            if (handle.IsClosed) throw new ObjectDisposedException(nameof(Tokenizer));
        }
    }
}
