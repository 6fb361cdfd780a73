// The built-in copy catalog is `default-copy-catalog.json` beside this file, embedded in the code by the package
// manager (`.embedInCode`), so that a job copied to /usr/local/bin or packaged as a Lambda `bootstrap` needs no
// resource bundle beside it. `pushctl copy export` writes it out as a file to edit; `--copy-catalog PATH` (or
// PUSH_COPY_CATALOG) replaces it.
let defaultCopyCatalogJSON = String(decoding: PackageResources.default_copy_catalog_json, as: UTF8.self)
