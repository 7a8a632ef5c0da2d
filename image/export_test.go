package image

// For the external tests.
var (
	ReadArchive = readArchive
	ModuleName  = moduleName
)
