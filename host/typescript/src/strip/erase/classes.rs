//! Classes: `abstract`, `implements`, the modifiers TypeScript adds to members, members that
//! are only types, and the markers and annotations after a field's name.

use swc_common::{BytePos, Span, Spanned};
use swc_ecma_ast::*;
use swc_ecma_visit::VisitWith;

use super::{gaps, Eraser};

/// The modifiers JavaScript does not have; they stand before a member's name.
const TYPE_MODIFIERS: [&str; 5] = ["public", "private", "protected", "readonly", "override"];

impl Eraser<'_> {
    /// Blanks `abstract` before `class`, and the `implements` clause.
    pub(super) fn erase_class_header(&mut self, class: &Class) {
        let header_end = class.body.first().map_or(class.span.hi, Spanned::span_lo);
        if class.is_abstract {
            // An abstract class's span starts at the keyword.
            let word = self
                .tokens(class.span.lo, header_end)
                .next()
                .filter(|&t| self.token_text(t) == "abstract");
            if let Some(word) = word {
                self.edits.blank(word.start, word.end);
            }
        }
        let (Some(first), Some(last)) = (class.implements.first(), class.implements.last()) else {
            return;
        };
        // The clause follows the last of the class's name, type parameters and superclass.
        let from = [
            class.super_type_params.as_ref().map(|p| p.span.hi),
            class.super_class.as_ref().map(|c| c.span_hi()),
            class.type_params.as_ref().map(|p| p.span.hi),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(class.span.lo);
        let keyword = self
            .tokens(from, first.span.lo)
            .find(|&t| self.token_text(t) == "implements");
        if let Some(keyword) = keyword {
            let end = self.at(last.span.hi);
            self.edits.blank(keyword.start, end);
        }
    }

    pub(super) fn erase_class_member(&mut self, member: &ClassMember) {
        match member {
            ClassMember::TsIndexSignature(signature) => self.erase_whole(signature.span),
            ClassMember::ClassProp(field) if field.declare || field.is_abstract => {
                self.erase_whole(field.span)
            }
            ClassMember::Method(method) if method.is_abstract || method.function.body.is_none() => {
                self.erase_whole(method.span)
            }
            ClassMember::PrivateMethod(method)
                if method.is_abstract || method.function.body.is_none() =>
            {
                self.erase_whole(method.span)
            }
            ClassMember::Constructor(constructor) if constructor.body.is_none() => {
                self.erase_whole(constructor.span)
            }
            ClassMember::AutoAccessor(field) if field.is_abstract => self.erase_whole(field.span),
            ClassMember::ClassProp(field) => {
                let first = self.blank_modifiers(field.span.lo, field.key.span_lo());
                let hazard = hazardous_name(&field.key);
                self.separate(field.span, first, hazard, field.is_static);
                self.erase_field_suffix(Field {
                    key: field.key.span(),
                    end: field.span.hi,
                    marker: marker(field.is_optional, field.definite),
                    annotation: field.type_ann.as_deref(),
                    value: field.value.as_deref(),
                });
                field.key.visit_with(self);
                field.value.visit_with(self);
            }
            // A `#name`, like `accessor`, cannot continue the previous member's expression:
            // private members and accessors need no `;` before them.
            ClassMember::PrivateProp(field) => {
                self.blank_modifiers(field.span.lo, field.key.span.lo);
                self.erase_field_suffix(Field {
                    key: field.key.span,
                    end: field.span.hi,
                    marker: marker(field.is_optional, field.definite),
                    annotation: field.type_ann.as_deref(),
                    value: field.value.as_deref(),
                });
                field.value.visit_with(self);
            }
            ClassMember::AutoAccessor(field) => {
                self.blank_modifiers(field.span.lo, field.key.span_lo());
                self.erase_field_suffix(Field {
                    key: field.key.span(),
                    end: field.span.hi,
                    marker: marker(false, field.definite),
                    annotation: field.type_ann.as_deref(),
                    value: field.value.as_deref(),
                });
                field.key.visit_with(self);
                field.value.visit_with(self);
            }
            ClassMember::Method(method) => {
                let first = self.blank_modifiers(method.span.lo, method.key.span_lo());
                let hazard = hazardous_name(&method.key) || method.function.is_generator;
                self.separate(method.span, first, hazard, method.is_static);
                if method.is_optional {
                    self.blank_marker(method.key.span_hi(), method.function.span.hi, "?");
                }
                method.key.visit_with(self);
                method.function.visit_with(self);
            }
            ClassMember::PrivateMethod(method) => {
                self.blank_modifiers(method.span.lo, method.key.span.lo);
                if method.is_optional {
                    self.blank_marker(method.key.span.hi, method.function.span.hi, "?");
                }
                method.function.visit_with(self);
            }
            ClassMember::Constructor(constructor) => {
                self.blank_modifiers(constructor.span.lo, constructor.key.span_lo());
                constructor.params.visit_with(self);
                constructor.body.visit_with(self);
            }
            _ => member.visit_children_with(self),
        }
    }

    /// Blanks the TypeScript modifiers between a member's start and its name; returns where
    /// the first one blanked started.
    fn blank_modifiers(&mut self, start: BytePos, name: BytePos) -> Option<usize> {
        let modifiers: Vec<gaps::Token> = self
            .tokens(start, name)
            .filter(|&t| TYPE_MODIFIERS.contains(&self.token_text(t)))
            .collect();
        for modifier in &modifiers {
            self.edits.blank(modifier.start, modifier.end);
        }
        modifiers.first().map(|m| m.start)
    }

    /// `x = a` then `public [k] = 1` on the next line: with `public` blanked, `[k]` would
    /// index `a`. Where the member's first token was a blanked modifier and what follows could
    /// continue the previous member, that first character becomes `;`.
    fn separate(
        &mut self,
        member: Span,
        first_blanked: Option<usize>,
        hazard: bool,
        is_static: bool,
    ) {
        if hazard
            && !is_static
            && first_blanked == Some(self.at(member.lo))
            && self.needs_separator()
        {
            self.edits.put(self.at(member.lo), ';');
        }
    }

    /// Blanks a field's `?` or `!` (its annotation is blanked as it is visited). A field named
    /// `get`, `set` or `static` with no value would read as a modifier of the next member
    /// once its annotation is gone: `;` ends it where the annotation or marker began.
    fn erase_field_suffix(&mut self, field: Field<'_>) {
        let annotation = field.annotation.map(|a| a.span.lo);
        let limit = [annotation, field.value.map(Spanned::span_lo)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(field.end);
        let marker = field
            .marker
            .and_then(|m| self.blank_marker(field.key.hi, limit, m));
        if let Some(annotation) = field.annotation {
            self.blank_span(annotation.span);
        }
        if field.value.is_some() {
            return;
        }
        let Some(separator) = annotation.map(|a| self.at(a)).or(marker) else {
            return;
        };
        let name = self.tokens(field.key.lo, field.key.hi).next();
        if name.is_some_and(|n| matches!(self.token_text(n), "get" | "set" | "static")) {
            self.edits.put(separator, ';');
        }
    }
}

/// What follows a field's name.
struct Field<'a> {
    key: Span,
    end: BytePos,
    marker: Option<&'static str>,
    annotation: Option<&'a TsTypeAnn>,
    value: Option<&'a Expr>,
}

fn marker(optional: bool, definite: bool) -> Option<&'static str> {
    if optional {
        Some("?")
    } else if definite {
        Some("!")
    } else {
        None
    }
}

/// A member name that could continue the previous member's expression: computed (`[k]`), or
/// the operators `in` and `instanceof`.
fn hazardous_name(key: &PropName) -> bool {
    match key {
        PropName::Computed(_) => true,
        PropName::Ident(name) => matches!(name.sym.as_ref(), "in" | "instanceof"),
        _ => false,
    }
}
