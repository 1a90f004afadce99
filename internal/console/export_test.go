package console

// Fields is fields, for the package's tests.
var Fields = fields
var NextURL = nextURL
