using System.Reflection;
using System.Runtime.CompilerServices;

[assembly: AssemblyTitle("Pvllm")]
[assembly: AssemblyDescription("C# SDK for pvllm, an embeddable LLM inference engine")]
[assembly: AssemblyVersion("0.11.0.0")]
[assembly: AssemblyInformationalVersion("0.11.0")]
// The tests check NativeMethods' struct layouts against the C header.
[assembly: InternalsVisibleTo("Pvllm.Tests")]
