import ArgumentParser
import FerryConfig

/// `enqueue --field key=value`: the per-file fields, as the sidecar that carries them.
enum FieldArguments {
    /// The sidecar (``FieldSidecar/encode(_:)``) for the `--field` values, each split at its first
    /// `=`, a name given twice being a repeated field; checked the way ferryd will read it
    /// (``FieldSidecar/parse(_:fileField:)``: placeholders, CR/LF/NUL, secret references, size).
    /// - Returns: `nil` when no `--field` was given.
    /// - Throws: `ValidationError` naming the field at fault.
    static func sidecar(for arguments: [String]) throws(ValidationError) -> [UInt8]? {
        guard !arguments.isEmpty else { return nil }
        var fields: [(name: String, value: String)] = []
        for argument in arguments {
            guard let equals = argument.firstIndex(of: "=") else {
                throw ValidationError("--field \(Format.printable(argument)): give it as key=value")
            }
            let name = String(argument[..<equals])
            guard !name.isEmpty else { throw ValidationError("--field \(Format.printable(argument)): the key before \"=\" is empty") }
            fields.append((name: name, value: String(argument[argument.index(after: equals)...])))
        }
        let sidecar = FieldSidecar.encode(fields)
        do {
            // The spool's file field is not known here; ferryd refuses a field of that name itself.
            _ = try FieldSidecar.parse(sidecar, fileField: "")
        } catch {
            // The sidecar's line numbers mean nothing to whoever typed the options: name the key.
            let prefix = error.key.map { "--field \(Format.printable($0))=…: " } ?? "--field: "
            throw ValidationError(prefix + Format.printable(error.message))
        }
        return sidecar
    }
}
