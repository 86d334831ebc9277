// Package pvllm is the Go SDK of pvllm, an embeddable LLM inference engine
// with a paged KV cache and continuous batching. It wraps the C ABI
// (pvllm/pvllm.h) with cgo and adds no engine logic: scheduling, sampling
// and tokenizing all happen in the library.
//
//	eng, err := pvllm.New(pvllm.Config{ModelPath: "models/stories260K"})
//	if err != nil { ... }
//	defer eng.Close()
//	res, err := eng.Generate(ctx, "Once upon a time", pvllm.GreedySamplingParams(32))
//
// Streaming: Submit returns a Stream whose Events channel carries each new
// piece of text as it is generated and closes after the request's last
// event (Output.RequestFinished); cancelling the context aborts the
// request. The library hands each event to its own request's Stream (an
// output handler), so any number of goroutines can each follow their own
// request, and a waiting Stream holds no OS thread.
//
// Chat: ChatRequest renders a conversation with the model's chat template
// (or ChatTemplateOptions.ChatTemplate) into a Request that submits the
// text without adding special tokens, since the template wrote its own
// BOS; Chat generates from it in one call. Request.NoAddSpecialTokens does
// the same for any prompt text.
//
// Tokenizers: OpenTokenizer reads a model's tokenizer and chat templates
// without its weights (Encode, Decode, ApplyChatTemplate, Info).
//
// Structured output: SamplingParams.Constraint makes the text match a JSON
// schema, any JSON object, a GBNF grammar, a regular expression or one of
// a list of choices (JSONSchema, JSONObject, Grammar, Regex, Choice).
//
// Build: cgo finds the header and libpvllm through pkg-config (`#cgo
// pkg-config: pvllm`), from the pvllm.pc that `cmake --install`, the Debian
// package libpvllm-dev and vcpkg install; set PKG_CONFIG_PATH for a prefix
// pkg-config does not search, and make the shared library findable at run
// time (LD_LIBRARY_PATH, ldconfig or an rpath) when it is not in a system
// folder.
//
// Errors: every failure is an *Error carrying the library's Status and the
// message of the call that failed; test kinds with
// errors.Is(err, pvllm.StatusInvalidArgument). Messages are taken from the
// error object that the same C call hands back, never from thread-local
// state, so they are right even though goroutines move between OS threads.
package pvllm
