using System;

namespace Pvllm
{
    /// <summary>
    /// The optional parts of <see cref="Engine.ApplyChatTemplate"/> and
    /// <see cref="Tokenizer.ApplyChatTemplate"/>; the defaults render the
    /// model's template and add the generation prompt.
    /// </summary>
    public sealed class ChatTemplateOptions
    {
        /// <summary>The tools' function schemas as a JSON array; null = none.</summary>
        public string ToolsJson { get; set; }

        /// <summary>More template variables as a JSON object, e.g. {"enable_thinking": false}; null = none.</summary>
        public string ExtraContextJson { get; set; }

        /// <summary>End with the header that opens the assistant's turn (default true).</summary>
        public bool AddGenerationPrompt { get; set; } = true;

        /// <summary>A named template of a model that ships several; null = "tool_use" when tools are given and the model has one, else "default".</summary>
        public string TemplateName { get; set; }

        /// <summary>
        /// A Jinja chat template rendered instead of the model's (for a model
        /// that ships none, or to try another), as vLLM's --chat-template;
        /// TemplateName is then ignored. The special tokens it reads
        /// (bos_token, eos_token) still come from the model. null (default):
        /// the model's; "" is InvalidArgument. Needs libpvllm 0.9 (Unsupported
        /// before). Since 0.9.
        /// </summary>
        public string ChatTemplate { get; set; }

        /// <summary>
        /// pvllm_chat_template_params over `messagesJson`; its strings live in
        /// `scope`. A string holding a NUL character is InvalidArgument.
        /// </summary>
        internal NativeMethods.pvllm_chat_template_params ToNative(NativeScope scope, string messagesJson)
        {
            if (ChatTemplate != null)
            {
                // An older library would ignore the field and render the model's.
                Library.Require(NativeMethods.VersionNumber09, "ChatTemplateOptions.ChatTemplate");
            }
            var p = NativeStruct.Init<NativeMethods.pvllm_chat_template_params>(
                NativeMethods.pvllm_chat_template_params_init);
            p.messages_json = scope.NulFreeUtf8String(messagesJson, "the messages' JSON");
            p.tools_json = scope.NulFreeUtf8String(ToolsJson, "the tools' JSON");
            p.extra_context_json = scope.NulFreeUtf8String(ExtraContextJson, "the extra context's JSON");
            p.add_generation_prompt = AddGenerationPrompt ? (byte)1 : (byte)0;
            p.template_name = scope.NulFreeUtf8String(TemplateName, "the template name");
            p.chat_template = scope.NulFreeUtf8String(ChatTemplate, "the chat template");
            return p;
        }
    }

    public sealed partial class Engine
    {
        /// <summary>
        /// Renders the model's chat template (pvllm_apply_chat_template) over
        /// <paramref name="messagesJson"/>, a JSON array of OpenAI-style
        /// messages such as [{"role": "user", "content": "Hi"}]. The text
        /// usually starts with the BOS token's text: submit it with
        /// Request.AddSpecialTokens = false (as ChatRequest does), or tokenize
        /// it without adding another. Throws PvllmException: NotFound when the
        /// model has no chat template, Unsupported for a construct the renderer
        /// does not implement, InvalidArgument for malformed JSON or messages
        /// the template rejects (with its message). Thread-safe.
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
                        NativeMethods.pvllm_apply_chat_template(handle, ref p, text, capacity, out length,
                            out error));
            }
        }

        /// <summary>
        /// A chat turn as a Request: <paramref name="messagesJson"/> rendered
        /// with the model's chat template (ApplyChatTemplate, with `options`)
        /// as the prompt text, with AddSpecialTokens = false since the
        /// template writes its own BOS, so the prompt starts with exactly one.
        /// Pass it to Submit, Stream, StreamAsync, Generate or GenerateAsync.
        /// Throws as ApplyChatTemplate; submitting it needs libpvllm 0.9.
        /// Thread-safe.
        /// </summary>
        public Request ChatRequest(string messagesJson, SamplingParams sampling = null,
                                   ChatTemplateOptions options = null)
        {
            string prompt = ApplyChatTemplate(messagesJson, options);
            return new Request(prompt, sampling) { AddSpecialTokens = false };
        }

        /// <summary>
        /// Renders a conversation with the model's chat template and queues it
        /// (ChatRequest, then Submit); returns the request's id. Thread-safe.
        /// </summary>
        public ulong SubmitChat(string messagesJson, SamplingParams sampling = null,
                                ChatTemplateOptions options = null)
            => Submit(ChatRequest(messagesJson, sampling, options));
    }
}
