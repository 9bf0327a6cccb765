package cli

// Codes of refusals the commands make themselves (docs/errors.md lists them all).
const (
	CodeOutput      = "E-REG-081"   // pack cannot write its output file
	CodeArchiveRead = "E-REG-082"   // publish cannot read the archive file, or it is too large
	CodeTaskFile    = "E-RUN-011"   // a --task @file that cannot be read
	CodeStoreArg    = "E-STORE-017" // store migrate given no database, or env:NAME naming an empty variable
)
