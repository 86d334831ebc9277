using System;

namespace Pvllm
{
    /// <summary>
    /// The one exception pvllm throws: a failed C call's status and the message
    /// the library attached to it.
    /// </summary>
    public sealed class PvllmException : Exception
    {
        public PvllmException(PvllmStatus status, string message)
            : base(string.IsNullOrEmpty(message) ? StatusName(status) : message)
        {
            Status = status;
        }

        /// <summary>The C status, e.g. PvllmStatus.NotFound.</summary>
        public PvllmStatus Status { get; }

        /// <summary>The C name of the status ("PVLLM_STATUS_NOT_FOUND").</summary>
        public string StatusText => StatusName(Status);

        public override string ToString() => $"PvllmException ({StatusText}): {base.ToString()}";

        internal static string StatusName(PvllmStatus status)
            => Utf8.FromNative(NativeMethods.pvllm_status_to_string(status));

        /// <summary>
        /// The one place a C status turns into an exception: does nothing for OK,
        /// otherwise throws with the message of `error`. Frees `error` either way
        /// (pvllm_error_free accepts NULL).
        /// </summary>
        internal static void Check(PvllmStatus status, IntPtr error)
        {
            if (status == PvllmStatus.Ok)
            {
                NativeMethods.pvllm_error_free(error);
                return;
            }
            string message;
            try
            {
                message = Utf8.FromNative(NativeMethods.pvllm_error_message(error));
            }
            finally
            {
                NativeMethods.pvllm_error_free(error);
            }
            throw new PvllmException(status, message);
        }
    }
}
