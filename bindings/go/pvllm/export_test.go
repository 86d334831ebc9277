package pvllm

// SetWaitDelivery makes the engines that New creates from now on deliver
// events as with a library older than 0.5 (each Stream waits in pvllm_wait
// and polls its request) when on is set, so that the tests cover that path
// with the library at hand. Not safe to call while another test runs New.
func SetWaitDelivery(on bool) { forceWaitDelivery = on }

// UsesOutputHandlers says whether eng delivers through output handlers.
func UsesOutputHandlers(eng *Engine) bool { return eng.e.handlers }

// JSONFlags is pvllm_sampling_params.constraint_flags for o, as Submit sets
// it.
func JSONFlags(o JSONOptions) uint32 { return o.flags() }
