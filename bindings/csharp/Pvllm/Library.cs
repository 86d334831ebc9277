namespace Pvllm
{
    /// <summary>Checks of the loaded libpvllm against what a call needs.</summary>
    internal static class Library
    {
        /// <summary>
        /// PvllmException Unsupported unless the loaded library has this
        /// binding's ABI and is at least MinVersionNumber (Engine.Create,
        /// Tokenizer.Open).
        /// </summary>
        internal static void CheckAbi()
        {
            uint abi = NativeMethods.pvllm_abi_version();
            if (abi != NativeMethods.AbiVersion)
            {
                throw new PvllmException(PvllmStatus.Unsupported,
                    $"libpvllm has ABI version {abi}, this binding needs {NativeMethods.AbiVersion}");
            }
            Require(NativeMethods.MinVersionNumber, "this binding");
        }

        /// <summary>
        /// PvllmException Unsupported unless the loaded library is at least
        /// `versionNumber` (MAJOR * 10000 + MINOR * 100 + PATCH): what an older
        /// one would ignore, or not export, fails here with `what` named.
        /// </summary>
        internal static void Require(uint versionNumber, string what)
        {
            if (NativeMethods.pvllm_version_number() >= versionNumber) return;
            throw new PvllmException(PvllmStatus.Unsupported,
                $"{what} needs libpvllm {versionNumber / 10000}.{versionNumber / 100 % 100} or newer; " +
                $"the loaded one is {Engine.Version}");
        }
    }
}
