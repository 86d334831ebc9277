using System;

namespace Pvllm
{
    /// <summary>
    /// The optional parts of <see cref="Engine.ApplyChatTemplate"/>; the
    /// defaults add the generation prompt and nothing else.
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
    }

    public sealed partial class Engine
    {
        /// <summary>
        /// Renders the model's chat template (pvllm_apply_chat_template) over
        /// <paramref name="messagesJson"/>, a JSON array of OpenAI-style
        /// messages such as [{"role": "user", "content": "Hi"}]. The text
        /// usually starts with the BOS token's text: tokenize it without
        /// adding another. Throws PvllmException: NotFound when the model has
        /// no chat template, Unsupported for a construct the renderer does not
        /// implement, InvalidArgument for malformed JSON or messages the
        /// template rejects (with its message). Thread-safe.
        /// </summary>
        public string ApplyChatTemplate(string messagesJson, ChatTemplateOptions options = null)
        {
            if (messagesJson == null) throw new ArgumentNullException(nameof(messagesJson));
            ThrowIfDisposed();
            options = options ?? new ChatTemplateOptions();
            using (var scope = new NativeScope())
            {
                var p = NativeStruct.Init<NativeMethods.pvllm_chat_template_params>(
                    NativeMethods.pvllm_chat_template_params_init);
                p.messages_json = scope.Utf8String(messagesJson);
                p.tools_json = scope.Utf8String(options.ToolsJson);
                p.extra_context_json = scope.Utf8String(options.ExtraContextJson);
                p.add_generation_prompt = options.AddGenerationPrompt ? (byte)1 : (byte)0;
                p.template_name = scope.Utf8String(options.TemplateName);
                return TextBuffer.Read(256,
                    (byte[] text, UIntPtr capacity, out UIntPtr length, out IntPtr error) =>
                        NativeMethods.pvllm_apply_chat_template(handle, ref p, text, capacity, out length,
                            out error));
            }
        }
    }
}
